package tokens

import (
	"encoding/base64"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/pkoukk/tiktoken-go-loader/assets"
)

// Encoding names.
const (
	O200KBase  = "o200k_base"
	CL100KBase = "cl100k_base"
)

// OpenAIEncodings are tiktoken's encodings, which the reference tests compare
// with pkoukk/tiktoken-go.
var OpenAIEncodings = []string{CL100KBase, O200KBase}

// EncodingNames lists the supported encodings: OpenAI's tiktoken encodings,
// then the open-weight families (families.go).
var EncodingNames = []string{CL100KBase, O200KBase, Llama3, Qwen2, Qwen25, DeepSeekV3, O200KHarmony, Gemma3}

// Encoding counts and encodes text with one tiktoken encoding. It is safe for
// concurrent use; one per encoding is shared by the whole process.
type Encoding struct {
	name      string
	piece     func(s string, i int) int
	normalize func(string) string // nil: none (Qwen: NFC)
	merger    *merger
	added     *addedTokens // nil: none (tiktoken's encode_ordinary)
	sp        *spModel     // a SentencePiece BPE (Gemma 3) instead of the above
}

// Name returns the encoding's name, e.g. "o200k_base".
func (e *Encoding) Name() string { return e.name }

// Count returns the number of tokens of text. OpenAI's encodings count
// special tokens as ordinary text (as tiktoken's encode_ordinary does); the
// open-weight families match their tokenizer's added tokens (<|im_start|>,
// <think>, ...) first, as the model's own tokenizer and the servers that use
// it (vLLM, SGLang) do.
func (e *Encoding) Count(text string) int {
	if e.sp != nil {
		var s spSink
		e.sp.run(text, &s)
		return s.n
	}
	if e.added != nil {
		n := 0
		e.segments(text, func(seg string) { n += e.countOrdinary(seg) }, func(string, int32) { n++ })
		return n
	}
	if e.normalize != nil {
		text = e.normalize(text)
	}
	return e.countOrdinary(text)
}

func (e *Encoding) countOrdinary(text string) int {
	n := 0
	for i := 0; i < len(text); {
		j := e.piece(text, i)
		n += e.merger.count(text[i:j])
		i = j
	}
	return n
}

// Encode returns the token ids of text (see Count for special tokens).
func (e *Encoding) Encode(text string) []int {
	var out []int
	if e.sp != nil {
		s := spSink{encode: true}
		e.sp.run(text, &s)
		return s.ids
	}
	if e.added != nil {
		e.segments(text, func(seg string) { out = e.encodeOrdinary(out, seg) }, func(_ string, id int32) { out = append(out, int(id)) })
		return out
	}
	if e.normalize != nil {
		text = e.normalize(text)
	}
	return e.encodeOrdinary(out, text)
}

func (e *Encoding) encodeOrdinary(out []int, text string) []int {
	for i := 0; i < len(text); {
		j := e.piece(text, i)
		out = e.merger.encode(out, text[i:j])
		i = j
	}
	return out
}

// Split returns the pre-tokenizer's pieces of text; for tests and tools.
func (e *Encoding) Split(text string) []string {
	var out []string
	if e.sp != nil {
		return e.sp.split(text)
	}
	if e.added != nil {
		e.segments(text, func(seg string) { out = append(out, e.splitOrdinary(seg)...) }, func(t string, _ int32) { out = append(out, t) })
		return out
	}
	if e.normalize != nil {
		text = e.normalize(text)
	}
	return e.splitOrdinary(text)
}

func (e *Encoding) splitOrdinary(text string) []string {
	var out []string
	for i := 0; i < len(text); {
		j := e.piece(text, i)
		out = append(out, text[i:j])
		i = j
	}
	return out
}

// LoadEncoding builds an encoding from the vocabulary embedded in the binary.
// It never touches the network. Loading takes 0.1–0.4 s of CPU; callers
// keep the result (see Encodings).
func LoadEncoding(name string) (*Encoding, error) {
	return LoadEncodingFrom(name, "")
}

// LoadEncodingFrom is LoadEncoding, reading the vocabularies that are not
// embedded (Llama 3) from dir, where `contextd tokenizer import` put them.
func LoadEncodingFrom(name, dir string) (*Encoding, error) {
	switch name {
	case O200KHarmony:
		enc, err := LoadEncodingFrom(O200KBase, dir)
		if err != nil {
			return nil, err
		}
		enc.name, enc.added = name, harmonyAdded()
		return enc, nil
	case Qwen25:
		enc, err := loadFamily(Qwen2, dir)
		if err != nil {
			return nil, err
		}
		enc.name, enc.added = name, enc.added.without(qwen3AddedTokens...)
		return enc, nil
	case Llama3, Qwen2, DeepSeekV3:
		return loadFamily(name, dir)
	case Gemma3:
		return loadSentencePiece(name, dir)
	}
	var piece func(string, int) int
	var file string
	switch name {
	case O200KBase:
		piece, file = pieceO200K, "o200k_base.tiktoken"
	case CL100KBase:
		piece, file = pieceCL100K, "cl100k_base.tiktoken"
	default:
		return nil, fmt.Errorf("unknown encoding %q (known: %s)", name, strings.Join(EncodingNames, ", "))
	}
	ranks, err := loadRanks(file)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", name, err)
	}
	return &Encoding{name: name, piece: piece, merger: newMerger(ranks)}, nil
}

func loadRanks(file string) (map[string]int32, error) {
	data, err := assets.Assets.ReadFile(path.Base(file))
	if err != nil {
		return nil, err
	}
	text := string(data)
	ranks := make(map[string]int32, strings.Count(text, "\n")+1)
	buf := make([]byte, 0, 256)
	for line := range strings.SplitSeq(text, "\n") {
		if line == "" {
			continue
		}
		tok, rank, ok := strings.Cut(line, " ")
		if !ok {
			return nil, fmt.Errorf("malformed vocabulary line %q", line)
		}
		buf = buf[:0]
		buf, err = base64.StdEncoding.AppendDecode(buf, []byte(tok))
		if err != nil {
			return nil, fmt.Errorf("vocabulary token %q: %w", tok, err)
		}
		r, err := strconv.ParseInt(rank, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("vocabulary rank %q: %w", rank, err)
		}
		ranks[string(buf)] = int32(r)
	}
	return ranks, nil
}
