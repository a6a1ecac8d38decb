package app

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"buf.build/gen/go/bufbuild/protovalidate/protocolbuffers/go/buf/validate"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/contextd/contextd/internal/chat"
)

// Admitting a request body before it is decoded. proto.Unmarshal allocates
// every element of a repeated field before any cap is checked: a million
// empty parts (two bytes each on the wire) became a million Part structs,
// bounded only by CONTEXTD_MAX_MESSAGE_BYTES. The body of every call is
// therefore walked first, as wire format, along its method's input
// descriptor, without allocating per element, and refused (InvalidArgument
// naming the field, as the checks after decoding would) when
//
//   - a repeated field or map holds more items in one message than its
//     buf.validate max_items / max_pairs allows (the caps protovalidate
//     checks after decoding), or a message more parts than
//     chat.MaxPartsPerMessage: messages[0].parts;
//   - the request holds more parts than chat.MaxPartsPerRequest or tool
//     calls than chat.MaxToolCallsPerRequest (chat.CheckStructure's caps):
//     messages.
//
// So what decoding allocates is bounded by the caps, not by the body's
// size. The walk stops at the first item over a cap. Every protocol
// reaches grpc-go through here (native gRPC directly, Connect and gRPC-Web
// in their binary encoding as vanguard's gRPC calls; JSON is decoded by
// vanguard first, so it is scanned before that, admitjson.go), and a refusal is a
// gRPC trailers-only answer that vanguard translates back. A body this does
// not understand (malformed, nested past 100 levels, compressed with
// something other than gzip) is passed on: grpc-go then answers as before.
type bodyCaps struct {
	inputs          map[string]*wirePlan // by method path, "/pkg.Service/Method"
	types           map[protoreflect.FullName]*wirePlan
	maxMessageBytes int
}

// wirePlan is what the walk needs of one message type.
type wirePlan struct {
	fields map[protowire.Number]*wireField
	lists  int // list and map fields: the counters an instance keeps
	// byJSON is fields by their JSON and proto names (admitjson.go).
	byJSON map[string]*wireField
	// wellKnown: a google.protobuf type, whose JSON form is its own;
	// mask is the paths field of google.protobuf.FieldMask, whose JSON
	// form is one string of comma-separated paths.
	wellKnown bool
	mask      *wireField
	// total is the index of the request-wide count of this type (-1:
	// none), with its cap and what it is called.
	total     int
	totalMax  int64
	totalName string
}

type wireField struct {
	name string
	sub  *wirePlan // message (or map entry) fields
	slot int       // counter of a list or map field; -1 otherwise
	max  int64     // max_items / max_pairs, or a tighter cap; 0: none
	// isMap: a map field, whose JSON is an object of pairs; mapValue is
	// the plan of its values when they are messages.
	isMap    bool
	mapValue *wirePlan
}

// requestTotals are chat.CheckStructure's request-wide caps, by type.
var requestTotals = []struct {
	name protoreflect.FullName
	max  int64
	what string
}{
	{"contextd.v1.Part", chat.MaxPartsPerRequest, "parts"},
	{"contextd.v1.ToolCallPart", chat.MaxToolCallsPerRequest, "tool calls"},
}

// fieldCaps are caps tighter than a field's buf.validate rule.
var fieldCaps = map[protoreflect.FullName]int64{
	"contextd.v1.Message.parts":       chat.MaxPartsPerMessage,
	"google.protobuf.FieldMask.paths": maxMaskPaths,
}

// maxMaskPaths bounds a field mask's paths (UpdateSession's update_mask
// names at most five fields): decoded, "a,a,a…" of 3 MB was 1.5 million
// strings, 412 MB allocated before the handler refused the first path.
const maxMaskPaths = 64

// newBodyCaps plans the input of every method srv serves.
func newBodyCaps(srv *grpc.Server, cfg Config) *bodyCaps {
	plans := map[protoreflect.FullName]*wirePlan{}
	c := &bodyCaps{inputs: map[string]*wirePlan{}, types: plans, maxMessageBytes: cfg.MaxMessageBytes}
	for name, info := range srv.GetServiceInfo() {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(name))
		if err != nil {
			continue
		}
		sd, ok := d.(protoreflect.ServiceDescriptor)
		if !ok {
			continue
		}
		for _, m := range info.Methods {
			if md := sd.Methods().ByName(protoreflect.Name(m.Name)); md != nil && !md.IsStreamingClient() {
				c.inputs["/"+name+"/"+m.Name] = planOf(md.Input(), plans)
			}
		}
	}
	return c
}

func planOf(md protoreflect.MessageDescriptor, plans map[protoreflect.FullName]*wirePlan) *wirePlan {
	if p, ok := plans[md.FullName()]; ok {
		return p
	}
	p := &wirePlan{fields: map[protowire.Number]*wireField{}, byJSON: map[string]*wireField{}, total: -1,
		wellKnown: md.ParentFile().Package() == "google.protobuf"}
	for i, t := range requestTotals {
		if t.name == md.FullName() {
			p.total, p.totalMax, p.totalName = i, t.max, t.what
		}
	}
	plans[md.FullName()] = p // before the fields: types may nest themselves
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		f := &wireField{name: string(fd.Name()), slot: -1}
		if fd.Message() != nil {
			f.sub = planOf(fd.Message(), plans)
		}
		if fd.IsMap() {
			f.isMap = true
			if v := fd.MapValue().Message(); v != nil {
				f.mapValue = planOf(v, plans)
			}
		}
		if fd.IsList() || fd.IsMap() {
			f.slot = p.lists
			p.lists++
			if rules, ok := proto.GetExtension(fd.Options(), validate.E_Field).(*validate.FieldRules); ok && rules != nil {
				f.max = int64(max(rules.GetRepeated().GetMaxItems(), rules.GetMap().GetMaxPairs()))
			}
			if c, ok := fieldCaps[fd.FullName()]; ok && (f.max == 0 || c < f.max) {
				f.max = c
			}
		}
		if f.sub != nil || f.slot >= 0 {
			p.fields[fd.Number()] = f
			p.byJSON[fd.JSONName()] = f
			p.byJSON[string(fd.Name())] = f
		}
	}
	if md.FullName() == "google.protobuf.FieldMask" {
		p.mask = p.byJSON["paths"]
	}
	return p
}

// errUnreadable stops a walk that cannot judge the body; it is passed on.
var errUnreadable = errors.New("body not walked")

// maxWireDepth is protobuf's own nesting limit.
const maxWireDepth = 100

// walk is one pass over a body.
type walk struct {
	counts []int64  // the list counters of the messages being walked
	path   []step   // made into names only for a refusal
	totals [2]int64 // by requestTotals
}

// step is a field the walk is in: an element of a list (index ≥ 0) or a
// singular field (-1).
type step struct {
	name  string
	index int64
}

// names is the path as field names: messages[0], parts[3].
func (w *walk) names() []string {
	out := make([]string, len(w.path))
	for i, s := range w.path {
		out[i] = s.name
		if s.index >= 0 {
			out[i] += "[" + strconv.FormatInt(s.index, 10) + "]"
		}
	}
	return out
}

// field names field f of the message being walked.
func (w *walk) field(f string) string {
	return strings.Join(append(w.names(), f), ".")
}

// check walks msg, the wire bytes of one request of plan; nil admits it.
func (c *bodyCaps) check(msg []byte, plan *wirePlan) *status.Status {
	var w walk
	if err := w.message([][]byte{msg}, plan, 0); err != nil && !errors.Is(err, errUnreadable) {
		return status.Convert(err)
	}
	return nil
}

// message walks one message of type p whose wire bytes are the chunks
// concatenated. A singular message field met more than once is one
// message to the decoder (protobuf merges the occurrences, appending
// their lists), so its occurrences are walked together after the rest, as
// one message: walked one by one, inline sent 20 times with 100,000
// messages each passed the cap of 100,000 and decoded 2,000,000. A
// singular field sent in more than maxPieces non-empty pieces is refused
// (no encoder splits one; it bounds what the walk keeps of them).
func (w *walk) message(chunks [][]byte, p *wirePlan, depth int) error {
	if depth > maxWireDepth {
		return errUnreadable
	}
	if p.total >= 0 {
		if w.totals[p.total]++; w.totals[p.total] > p.totalMax {
			return w.tooManyTogether(p)
		}
	}
	base := len(w.counts)
	for range p.lists {
		w.counts = append(w.counts, 0)
	}
	defer func() { w.counts = w.counts[:base] }()
	var small [4]singular
	singles := small[:0] // in order of first occurrence
	for _, b := range chunks {
		for len(b) > 0 {
			num, typ, n := protowire.ConsumeTag(b)
			if n < 0 {
				return errUnreadable
			}
			b = b[n:]
			f := p.fields[num]
			if f == nil || typ != protowire.BytesType {
				if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
					return errUnreadable
				}
				b = b[n:]
				continue
			}
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return errUnreadable
			}
			b = b[n:]
			if f.slot < 0 { // a singular message field: walked below
				var err error
				if singles, err = w.addPiece(singles, f, v); err != nil {
					return err
				}
				continue
			}
			i := w.counts[base+f.slot]
			w.counts[base+f.slot]++
			if f.max > 0 && i >= f.max {
				return w.tooMany(f)
			}
			if f.sub != nil {
				w.path = append(w.path, step{f.name, i})
				one := [1][]byte{v}
				err := w.message(one[:], f.sub, depth+1)
				w.path = w.path[:len(w.path)-1]
				if err != nil {
					return err
				}
			}
		}
	}
	for _, sg := range singles {
		w.path = append(w.path, step{sg.f.name, -1})
		one := [1][]byte{sg.first}
		pieces := one[:]
		if len(sg.more) > 0 {
			pieces = append(pieces, sg.more...)
		}
		err := w.message(pieces, sg.f.sub, depth+1)
		w.path = w.path[:len(w.path)-1]
		if err != nil {
			return err
		}
	}
	return nil
}

// maxPieces bounds the non-empty occurrences of one singular message
// field in one message.
const maxPieces = 64

// singular is a singular message field's occurrences in one message.
type singular struct {
	f     *wireField
	first []byte
	more  [][]byte
}

// addPiece records an occurrence v of the singular field f.
func (w *walk) addPiece(singles []singular, f *wireField, v []byte) ([]singular, error) {
	for i := range singles {
		if singles[i].f != f {
			continue
		}
		if len(v) > 0 {
			if len(singles[i].more)+1 >= maxPieces {
				field := w.field(f.name)
				desc := fmt.Sprintf("is sent in more than %d pieces; a singular message field may come in at most %d", maxPieces, maxPieces)
				return nil, invalidField(field, desc)
			}
			singles[i].more = append(singles[i].more, v)
		}
		return singles, nil
	}
	return append(singles, singular{f: f, first: v}), nil
}

func (w *walk) tooMany(f *wireField) error {
	field := w.field(f.name)
	desc := fmt.Sprintf("has more than %d items; at most %d are allowed", f.max, f.max)
	return invalidField(field, desc)
}

// invalidField is InvalidArgument naming field, with its BadRequest
// violation.
func invalidField(field, desc string) error {
	st := status.New(codes.InvalidArgument, fmt.Sprintf("%s: %s; refused before decoding", field, desc))
	if d, err := st.WithDetails(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: field, Description: desc}}}); err == nil {
		st = d
	}
	return st.Err()
}

// handler checks the first message of every call to a planned method
// before next (grpc-go) reads it. The frame it read is handed on as it
// came; it holds at most CONTEXTD_MAX_MESSAGE_BYTES (a longer frame is
// passed on unread: grpc-go refuses it).
func (c *bodyCaps) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		plan := c.inputs[r.URL.Path]
		if plan == nil || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		frame, err := c.readFrame(r.Body)
		if err == nil {
			if st := c.checkFrame(frame, r.Header.Get("Grpc-Encoding"), plan); st != nil {
				writeStatus(w, st)
				return
			}
		}
		r.Body = &replay{frame: frame, rest: r.Body}
		frame = nil
		next.ServeHTTP(w, r)
	})
}

// readFrame reads one gRPC frame: its 5-byte header and message. What it
// read is returned even with an error.
func (c *bodyCaps) readFrame(body io.Reader) ([]byte, error) {
	var hdr [5]byte
	if n, err := io.ReadFull(body, hdr[:]); err != nil {
		return hdr[:n], err
	}
	size := binary.BigEndian.Uint32(hdr[1:])
	if int64(size) > int64(c.maxMessageBytes) {
		return hdr[:], errUnreadable
	}
	frame := make([]byte, 5+int(size))
	copy(frame, hdr[:])
	n, err := io.ReadFull(body, frame[5:])
	return frame[:5+n], err
}

func (c *bodyCaps) checkFrame(frame []byte, encoding string, plan *wirePlan) *status.Status {
	msg := frame[5:]
	if frame[0]&1 == 1 {
		if encoding != "gzip" {
			return nil
		}
		zr, err := gzip.NewReader(bytes.NewReader(msg))
		if err != nil {
			return nil
		}
		if msg, err = io.ReadAll(io.LimitReader(zr, int64(c.maxMessageBytes)+1)); err != nil || len(msg) > c.maxMessageBytes {
			return nil
		}
	}
	return c.check(msg, plan)
}

// writeStatus answers a gRPC call with st alone (trailers-only), details
// included.
func writeStatus(w http.ResponseWriter, st *status.Status) {
	h := w.Header()
	h.Set("Content-Type", "application/grpc")
	h.Set("Grpc-Status", strconv.Itoa(int(st.Code())))
	h.Set("Grpc-Message", grpcMessage(st.Message()))
	if len(st.Details()) > 0 {
		if b, err := proto.Marshal(st.Proto()); err == nil {
			h.Set("Grpc-Status-Details-Bin", base64.RawStdEncoding.EncodeToString(b))
		}
	}
	w.WriteHeader(http.StatusOK)
}

// tooManyTogether refuses a request holding more elements of p's type than
// its request-wide cap, naming the list they are in (messages), as
// chat.CheckStructure does.
func (w *walk) tooManyTogether(p *wirePlan) error {
	path := w.names()
	at, list := strings.Join(path, "."), strings.Join(path, ".")
	for k, elem := range path { // the outermost list: messages, inline.messages
		if i := strings.IndexByte(elem, '['); i >= 0 {
			at = strings.Join(path[:k+1], ".")
			list = strings.Join(append(path[:k:k], elem[:i]), ".")
			break
		}
	}
	desc := fmt.Sprintf("have more than %d %s together (at %s); a request may have at most %d", p.totalMax, p.totalName, at, p.totalMax)
	return invalidField(list, desc)
}

// replay hands on a frame read ahead, then the rest of the body. It lets go
// of the frame as soon as it is read (grpc-go has its own copy then), so a
// call that waits afterwards, for the count budget say, does not hold its
// body twice.
type replay struct {
	frame []byte
	rest  io.ReadCloser
}

func (r *replay) Read(p []byte) (int, error) {
	if len(r.frame) == 0 {
		r.frame = nil
		return r.rest.Read(p)
	}
	n := copy(p, r.frame)
	if r.frame = r.frame[n:]; len(r.frame) == 0 {
		r.frame = nil
	}
	return n, nil
}

func (r *replay) Close() error { return r.rest.Close() }
