package tokens

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/contextd/contextd/internal/chat"
)

// chatTemplate frames a chat request the way one model family's own chat
// template does (tokenizer_config.json's Jinja template, rendered by the
// server with add_generation_prompt=True), so that a request's count equals
// len(apply_chat_template(..., tokenize=True)). Messages are rendered and
// counted one by one: every template here separates them with special
// tokens, which the tokenizer matches before pre-tokenizing, so the counts
// add up exactly.
type chatTemplate interface {
	// prefix counts what comes before the first message: the system prompt
	// and the tool declarations (toolTokens is what declaring them adds).
	// present says whether there is a system prompt at all: a leading
	// system message is one even when it has no text, since the templates
	// test messages[0]['role'] == 'system' (an empty system prompt field is
	// none). system is never non-empty without present.
	prefix(enc *Encoding, system string, present bool, tools []chat.Tool) (sysTokens, toolTokens int64, perTool []ToolCount)
	// message counts msgs[i]. With context, its neighbours are known (a
	// whole request); without, it is counted as it renders in the middle of
	// a conversation (a stored session's message).
	message(enc *Encoding, msgs []chat.Message, i int, context bool) MessageCount
	// replyPriming is the generation prompt's tokens.
	replyPriming() int
}

// requestScoped is a chatTemplate whose rendering of a message depends on
// facts about the whole request (Qwen3: which user message is the last
// query); forRequest works them out once, so a request costs linear time.
type requestScoped interface {
	forRequest(msgs []chat.Message) chatTemplate
}

// toolScoped is a chatTemplate whose rendering of a message depends on
// whether the request declares tools (Llama 3.1 declares them in the first
// message, whatever its role).
type toolScoped interface {
	withTools(tools []chat.Tool) chatTemplate
}

// systemReader is a chatTemplate that reads a leading system message its
// own way (Gemma 3: only the first part's text): the system prompt's text,
// and what the message's other parts (images) add.
type systemReader interface {
	leadingSystem(m *chat.Message) (text string, images int64)
}

// Template names (Model.Template).
const (
	TemplateQwen3      = "qwen3"
	TemplateQwen25     = "qwen2.5"
	TemplateLlama3     = "llama3"
	TemplateLlama31    = "llama3.1"
	TemplateDeepSeekV3 = "deepseek_v3"
	TemplateHarmony    = "harmony"
)

var chatTemplates = map[string]chatTemplate{
	TemplateQwen3:      qwen3Template{},
	TemplateQwen25:     qwen25Template{},
	TemplateLlama3:     llama3Template{},
	TemplateLlama31:    llama31Template{},
	TemplateDeepSeekV3: deepseekV3Template{},
	TemplateHarmony:    harmonyTemplate{},
	TemplateGemma3:     gemma3Template{},
}

// messageText joins a message's text parts as servers do for templates that
// take string content (vLLM joins them with a newline).
func messageText(m *chat.Message) string {
	var texts []string
	for _, p := range m.Parts {
		if p.Type == chat.PartText {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// imageTokens sums the image parts of a message (OpenAI's rule: the
// families here are counted as text models).
func imageTokens(m *chat.Message) int64 {
	var n int64
	for _, p := range m.Parts {
		if p.Type == chat.PartImage {
			n += ImageTokens(p.Image)
		}
	}
	return n
}

// toolJSON renders a tool declaration as {"type": "function", "function":
// {...}} in the templates' tojson form.
func toolJSON(t chat.Tool) string {
	var b strings.Builder
	b.WriteString(`{"type": "function", "function": {"name": `)
	writeJSString(&b, t.Name)
	if t.Description != "" {
		b.WriteString(`, "description": `)
		writeJSString(&b, t.Description)
	}
	if t.Parameters != "" {
		b.WriteString(`, "parameters": `)
		b.WriteString(templateJSON(t.Parameters))
	}
	b.WriteString("}}")
	return b.String()
}

// templateJSON re-serializes JSON text as the templates' tojson filter does
// on what the server parsed (vLLM and SGLang json.loads tool-call arguments;
// transformers' tojson is json.dumps with ensure_ascii=False): ", " and ": "
// separators, keys in their given order, non-ASCII as is, numbers as Python
// prints them (pyNumber). Text that is not JSON is returned unchanged (a
// template prints a string argument as it is).
func templateJSON(text string) string {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var b strings.Builder
	if err := writeTemplateJSON(&b, dec, "", 0, 5*len(text)+templateJSONSlack); err != nil {
		return text
	}
	if _, err := dec.Token(); err == nil {
		return text // trailing data
	}
	return b.String()
}

// templateJSONIndent is templateJSON with tojson(indent=n)'s layout
// (json.dumps(indent=n)): one item per line, "," between items, empty
// containers as {} and [].
func templateJSONIndent(text string, indent int) string {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var b strings.Builder
	if err := writeTemplateJSON(&b, dec, strings.Repeat(" ", indent), 0, 16*len(text)+templateJSONSlack); err != nil {
		return text
	}
	if _, err := dec.Token(); err == nil {
		return text
	}
	return b.String()
}

// Bounds of the re-serialization (work, memory and stack are per request):
// a value nested deeper than maxTemplateJSONDepth is not re-serialized
// (Python's json.loads, which the servers run first, refuses nesting of
// about 1,000 levels: such a request never reaches the template), and a
// rendering that outgrows its input by more than its limit stops: 5 times
// the input plus templateJSONSlack (Python prints 9e15 as
// 9000000000000000.0), 16 times with indentation (each line of a deep value
// repeats the indent). In both cases the text is counted as given.
const (
	maxTemplateJSONDepth = 512
	templateJSONSlack    = 64 << 10
)

var errTemplateJSONBound = errors.New("JSON too deep or too large to re-serialize")

// writeTemplateJSON writes the next JSON value of dec; a non-empty indent
// puts each item on its own line, indented depth+1 times. It stops with
// errTemplateJSONBound past maxTemplateJSONDepth or limit bytes written.
func writeTemplateJSON(b *strings.Builder, dec *json.Decoder, indent string, depth, limit int) error {
	if depth > maxTemplateJSONDepth || b.Len() > limit {
		return errTemplateJSONBound
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch v := tok.(type) {
	case json.Delim:
		closing := byte('}')
		if v == '[' {
			closing = ']'
		}
		b.WriteByte(byte(v))
		sep := ", "
		if indent != "" {
			sep = ","
		}
		items := 0
		for ; dec.More(); items++ {
			if items > 0 {
				b.WriteString(sep)
			}
			if indent != "" {
				b.WriteByte('\n')
				for range depth + 1 {
					b.WriteString(indent)
				}
			}
			if v == '{' {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				key, ok := k.(string)
				if !ok {
					return fmt.Errorf("object key %v", k)
				}
				writeJSString(b, key)
				b.WriteString(": ")
			}
			if b.Len() > limit {
				return errTemplateJSONBound
			}
			if err := writeTemplateJSON(b, dec, indent, depth+1, limit); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return err
		}
		if indent != "" && items > 0 {
			b.WriteByte('\n')
			for range depth {
				b.WriteString(indent)
			}
		}
		b.WriteByte(closing)
	case string:
		writeJSString(b, v)
	case json.Number:
		b.WriteString(pyNumber(v))
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case nil:
		b.WriteString("null")
	}
	return nil
}

// pyNumber prints a JSON number as Python's json.dumps prints what
// json.loads made of it: without a fraction or an exponent it is an int,
// printed exactly (-0 → 0, any number of digits); otherwise a float, printed
// as its repr: the shortest digits that read back the same, with ".0" when
// integral (1.0, 1e3 → 1000.0), in exponent form below 1e-4 and from 1e16
// (1e-05, 1e+16), "-0.0", and Infinity beyond the float range.
func pyNumber(n json.Number) string {
	s := string(n)
	if !strings.ContainsAny(s, ".eE") {
		if s == "-0" {
			return "0"
		}
		return s
	}
	f, err := strconv.ParseFloat(s, 64)
	switch {
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case err != nil:
		return s
	case f == 0 && math.Signbit(f):
		return "-0.0"
	case f == 0:
		return "0.0"
	}
	// d.ddde±x: the digits, and the decimal point after decpt of them
	// (Python's format_float_short, mode 'r').
	mant, exp, _ := strings.Cut(strconv.FormatFloat(math.Abs(f), 'e', -1, 64), "e")
	x, _ := strconv.Atoi(exp)
	digits, decpt := strings.Replace(mant, ".", "", 1), x+1
	var b strings.Builder
	if f < 0 {
		b.WriteByte('-')
	}
	switch {
	case decpt <= -4 || decpt > 16:
		b.WriteString(mant)
		b.WriteByte('e')
		if x < 0 {
			b.WriteByte('-')
			x = -x
		} else {
			b.WriteByte('+')
		}
		if x < 10 {
			b.WriteByte('0')
		}
		b.WriteString(strconv.Itoa(x))
	case decpt <= 0:
		b.WriteString("0.")
		b.WriteString(strings.Repeat("0", -decpt))
		b.WriteString(digits)
	case decpt >= len(digits):
		b.WriteString(digits)
		b.WriteString(strings.Repeat("0", decpt-len(digits)))
		b.WriteString(".0")
	default:
		b.WriteString(digits[:decpt])
		b.WriteByte('.')
		b.WriteString(digits[decpt:])
	}
	return b.String()
}

// jsNumber prints a number as JavaScript does (1.50 → 1.5, 1e3 → 1000).
func jsNumber(n json.Number) string {
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsInf(f, 0) {
		return string(n)
	}
	if f == 0 {
		return "0"
	}
	if a := math.Abs(f); a >= 1e21 || a < 1e-6 {
		s := strconv.FormatFloat(f, 'e', -1, 64)
		return strings.Replace(s, "e-0", "e-", 1)
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// writeJSString quotes s as JSON.stringify and json.dumps(ensure_ascii=False)
// do.
func writeJSString(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if c < 0x20 {
				b.WriteString(`\u00`)
				b.WriteByte(hex[c>>4])
				b.WriteByte(hex[c&0xF])
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
}
