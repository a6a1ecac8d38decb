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

// EncodingNames lists the supported encodings.
var EncodingNames = []string{CL100KBase, O200KBase}

// Encoding counts and encodes text with one tiktoken encoding. It is safe for
// concurrent use; one per encoding is shared by the whole process.
type Encoding struct {
	name   string
	piece  func(s string, i int) int
	merger *merger
}

// Name returns the encoding's name, e.g. "o200k_base".
func (e *Encoding) Name() string { return e.name }

// Count returns the number of tokens of text, special tokens counted as
// ordinary text (as tiktoken's encode_ordinary does).
func (e *Encoding) Count(text string) int {
	n := 0
	for i := 0; i < len(text); {
		j := e.piece(text, i)
		n += e.merger.count(text[i:j])
		i = j
	}
	return n
}

// Encode returns the token ids of text (tiktoken's encode_ordinary).
func (e *Encoding) Encode(text string) []int {
	var out []int
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
	for i := 0; i < len(text); {
		j := e.piece(text, i)
		out = append(out, text[i:j])
		i = j
	}
	return out
}

// LoadEncoding builds an encoding from the vocabulary embedded in the binary.
// It never touches the network. Loading takes tens of milliseconds; callers
// keep the result (see Encodings).
func LoadEncoding(name string) (*Encoding, error) {
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
