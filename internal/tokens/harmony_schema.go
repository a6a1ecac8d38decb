package tokens

import (
	"encoding/json"
	"errors"
	"strings"
)

// schemaValue is a JSON value with its object members in document order,
// which harmony's TypeScript rendering of tool parameters follows.
type schemaValue struct {
	kind    byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' bool, 'z' null
	str     string
	num     json.Number
	boolean bool
	arr     []schemaValue
	keys    []string
	vals    []schemaValue
}

// parseSchema reads JSON text, keeping member order; ok is false when it is
// not one JSON value.
func parseSchema(text string) (schemaValue, bool) {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	v, err := readSchemaValue(dec, 0)
	if err != nil {
		return schemaValue{}, false
	}
	if _, err := dec.Token(); err == nil {
		return schemaValue{}, false
	}
	return v, true
}

// maxSchemaDepth bounds the nesting of a parameters schema the harmony
// renderer writes out: each level of the TypeScript it writes copies and
// indents what is below it, so the work grows with depth times size. A
// deeper schema (no real tool has one) is declared as taking no
// parameters, like one that is not JSON.
const maxSchemaDepth = 128

var errSchemaDepth = errors.New("schema nested too deeply")

func readSchemaValue(dec *json.Decoder, depth int) (schemaValue, error) {
	if depth > maxSchemaDepth {
		return schemaValue{}, errSchemaDepth
	}
	tok, err := dec.Token()
	if err != nil {
		return schemaValue{}, err
	}
	switch t := tok.(type) {
	case json.Delim:
		v := schemaValue{kind: 'a'}
		if t == '{' {
			v.kind = 'o'
		}
		for dec.More() {
			if v.kind == 'o' {
				k, err := dec.Token()
				if err != nil {
					return v, err
				}
				key, _ := k.(string)
				v.keys = append(v.keys, key)
			}
			e, err := readSchemaValue(dec, depth+1)
			if err != nil {
				return v, err
			}
			if v.kind == 'o' {
				v.vals = append(v.vals, e)
			} else {
				v.arr = append(v.arr, e)
			}
		}
		_, err := dec.Token()
		return v, err
	case string:
		return schemaValue{kind: 's', str: t}, nil
	case json.Number:
		return schemaValue{kind: 'n', num: t}, nil
	case bool:
		return schemaValue{kind: 'b', boolean: t}, nil
	default:
		return schemaValue{kind: 'z'}, nil
	}
}

// get returns an object's member (the first of that name).
func (v *schemaValue) get(key string) (*schemaValue, bool) {
	if v.kind != 'o' {
		return nil, false
	}
	for i, k := range v.keys {
		if k == key {
			return &v.vals[i], true
		}
	}
	return nil, false
}

// getString returns a member that is a string.
func (v *schemaValue) getString(key string) (string, bool) {
	if m, ok := v.get(key); ok && m.kind == 's' {
		return m.str, true
	}
	return "", false
}

// getArray returns a member that is an array.
func (v *schemaValue) getArray(key string) ([]schemaValue, bool) {
	if m, ok := v.get(key); ok && m.kind == 'a' {
		return m.arr, true
	}
	return nil, false
}

func (v *schemaValue) nullable() bool {
	m, ok := v.get("nullable")
	return ok && m.kind == 'b' && m.boolean
}

func (v *schemaValue) isEnum() bool {
	a, ok := v.getArray("enum")
	return ok && len(a) > 0
}

// writeCompact writes v as compact JSON (serde_json's Display).
func (v *schemaValue) writeCompact(b *strings.Builder) {
	switch v.kind {
	case 'o':
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSString(b, k)
			b.WriteByte(':')
			v.vals[i].writeCompact(b)
		}
		b.WriteByte('}')
	case 'a':
		b.WriteByte('[')
		for i := range v.arr {
			if i > 0 {
				b.WriteByte(',')
			}
			v.arr[i].writeCompact(b)
		}
		b.WriteByte(']')
	case 's':
		writeJSString(b, v.str)
	case 'n':
		b.WriteString(jsNumber(v.num))
	case 'b':
		if v.boolean {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	default:
		b.WriteString("null")
	}
}

// defaultComment is harmony's rendering of a default value: a string in
// quotes, or bare for an enum (quoted: true keeps quotes, as a union
// variant's does), anything else as compact JSON.
func defaultComment(d *schemaValue, enum, quoteEnum bool) string {
	var b strings.Builder
	b.WriteString("default: ")
	switch {
	case d.kind == 's' && !enum:
		b.WriteString(`"` + d.str + `"`)
	case d.kind == 's' && !quoteEnum:
		b.WriteString(d.str)
	default:
		d.writeCompact(&b)
	}
	return b.String()
}

// writeTypeScript renders a JSON schema as the TypeScript type harmony
// declares a tool's parameters with (openai-harmony's
// json_schema_to_typescript): objects as { key?: type, ... } with
// descriptions, titles, examples and defaults as // comments, string enums
// as unions of literals, arrays as T[], oneOf as | lines, nullable as
// | null, anything else as any.
func writeTypeScript(b *tsWriter, s *schemaValue, indent string) {
	if b.over {
		return
	}
	if variants, ok := s.getArray("oneOf"); ok {
		for i := range variants {
			v := &variants[i]
			b.WriteString("\n" + indent + " | ")
			writeVariant(b, v, indent+"   ")
			var comments []string
			if d, ok := v.getString("description"); ok {
				comments = append(comments, d)
			}
			if d, ok := v.get("default"); ok {
				comments = append(comments, defaultComment(d, v.isEnum(), true))
			}
			if len(comments) > 0 {
				b.WriteString(" // " + strings.Join(comments, " "))
			}
		}
		return
	}
	if types, ok := s.getArray("type"); ok {
		var names []string
		for _, t := range types {
			if t.kind == 's' {
				if t.str == "integer" {
					names = append(names, "number")
				} else {
					names = append(names, t.str)
				}
			}
		}
		if len(names) > 0 {
			b.WriteString(strings.Join(names, " | "))
			return
		}
	}
	typ, ok := s.getString("type")
	if !ok {
		b.WriteString("any")
		return
	}
	switch typ {
	case "object":
		writeObjectType(b, s, indent)
	case "string":
		if values, ok := s.getArray("enum"); ok {
			var lits []string
			for _, e := range values {
				if e.kind == 's' {
					lits = append(lits, `"`+e.str+`"`)
				}
			}
			if len(lits) > 0 {
				b.WriteString(strings.Join(lits, " | "))
				return
			}
		}
		b.WriteString("string")
	case "number", "integer":
		b.WriteString("number")
	case "boolean":
		b.WriteString("boolean")
	case "array":
		if items, ok := s.get("items"); ok {
			writeTypeScript(b, items, indent)
			b.WriteString("[]")
		} else {
			b.WriteString("Array<any>")
		}
	default:
		b.WriteString("any")
	}
}

// writeVariant writes a union variant, with | null when it is nullable
// (and "null" is not in what it wrote already).
func writeVariant(b *tsWriter, v *schemaValue, indent string) {
	start := b.Len()
	writeTypeScript(b, v, indent)
	if v.nullable() && !b.nullSince(start) {
		b.WriteString(" | null")
	}
}

func writeObjectType(b *tsWriter, s *schemaValue, indent string) {
	if d, ok := s.getString("description"); ok {
		b.WriteString(indent + "// " + d + "\n")
	}
	b.WriteString("{\n")
	props, _ := s.get("properties")
	if props != nil && props.kind == 'o' {
		required := map[string]bool{}
		if req, ok := s.getArray("required"); ok {
			for _, r := range req {
				if r.kind == 's' {
					required[r.str] = true
				}
			}
		}
		for i, key := range props.keys {
			val := &props.vals[i]
			optional := "?"
			if required[key] {
				optional = ""
			}
			if t, ok := val.getString("title"); ok {
				b.WriteString(indent + "// " + t + "\n" + indent + "//\n")
			}
			variants, isUnion := val.getArray("oneOf")
			_, hasOneOf := val.get("oneOf")
			if !hasOneOf {
				if d, ok := val.getString("description"); ok {
					b.WriteString(indent + "// " + d + "\n")
				}
			}
			if ex, ok := val.getArray("examples"); ok && len(ex) > 0 {
				b.WriteString(indent + "// Examples:\n")
				for _, e := range ex {
					if e.kind == 's' {
						b.WriteString(indent + `// - "` + e.str + "\"\n")
					}
				}
			}
			if isUnion {
				writeUnionProperty(b, val, variants, key+optional, indent)
				continue
			}
			b.WriteString(indent + key + optional + ": ")
			writeVariant(b, val, indent+"    ")
			b.WriteByte(',')
			if d, ok := val.get("default"); ok && !hasOneOf {
				b.WriteString(" // " + defaultComment(d, val.isEnum(), false))
			}
			b.WriteByte('\n')
		}
	}
	b.WriteString(indent + "}")
}

// writeUnionProperty writes a property whose schema is a oneOf, one variant
// per line.
func writeUnionProperty(b *tsWriter, val *schemaValue, variants []schemaValue, name, indent string) {
	propDesc, hasDesc := val.getString("description")
	above := false
	if hasDesc {
		first := ""
		if len(variants) > 0 {
			first, _ = variants[0].getString("description")
		}
		if len(variants) == 0 || first != propDesc || !hasFirstDescription(variants) {
			b.WriteString(indent + "// " + propDesc + "\n")
			above = true
		}
	}
	if d, ok := val.get("default"); ok {
		b.WriteString(indent + "// " + defaultComment(d, val.isEnum(), false) + "\n")
	}
	b.WriteString(indent + name + ":\n")
	for i := range variants {
		v := &variants[i]
		b.WriteString(indent + " | ")
		writeVariant(b, v, indent+"   ")
		var comments []string
		if d, ok := v.getString("description"); ok && !(i == 0 && above) && (!hasDesc || d != propDesc) {
			comments = append(comments, d)
		}
		if d, ok := v.get("default"); ok {
			comments = append(comments, defaultComment(d, v.isEnum(), false))
		}
		if len(comments) > 0 {
			b.WriteString(" // " + strings.Join(comments, " "))
		}
		b.WriteByte('\n')
	}
	b.WriteString(indent + ",\n")
}

func hasFirstDescription(variants []schemaValue) bool {
	_, ok := variants[0].getString("description")
	return ok
}

// tsWriter is the one buffer a tool's TypeScript is written into. It stops
// taking text past limit (over is set; the caller then counts the schema as
// given), and finds "null" in what was written by scanning each byte once,
// so that asking whether a variant's rendering mentions null costs no
// re-scan of it (a nested variant used to be rendered into its own buffer,
// copied and searched at every level: depth × size).
type tsWriter struct {
	b        strings.Builder
	limit    int
	over     bool
	scanned  int // bytes of b searched for "null"
	lastNull int // start of the last "null" found; -1: none
}

func newTSWriter(limit int) *tsWriter { return &tsWriter{limit: limit, lastNull: -1} }

func (w *tsWriter) WriteString(s string) {
	if w.over {
		return
	}
	if w.b.Len()+len(s) > w.limit {
		w.over = true
		return
	}
	w.b.WriteString(s)
}

func (w *tsWriter) WriteByte(c byte) error {
	w.WriteString(string(c))
	return nil
}

func (w *tsWriter) Len() int { return w.b.Len() }

func (w *tsWriter) String() string { return w.b.String() }

// nullSince reports whether "null" was written at or after start.
func (w *tsWriter) nullSince(start int) bool {
	s := w.b.String()
	from := max(w.scanned-len("null")+1, 0)
	for {
		i := strings.Index(s[from:], "null")
		if i < 0 {
			break
		}
		w.lastNull = from + i
		from += i + 1
	}
	w.scanned = len(s)
	return w.lastNull >= start
}
