package tokens

import (
	"bytes"
	"embed"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/text/unicode/norm"
)

// Encoding names of the open-weight families.
const (
	// Llama3 is Llama 3.0–3.3's 128,256-token byte-level BPE (cl100k_base's
	// split pattern). Its licence binds redistributors, so it is not embedded:
	// import it into CONTEXTD_TOKENIZERS_DIR (see docs/tokens.md).
	Llama3 = "llama3"
	// Qwen2 is the 151,643-token byte-level BPE of Qwen 2, 2.5 and 3 (NFC,
	// one digit per piece). Apache-2.0; embedded.
	Qwen2 = "qwen2"
	// Qwen25 is Qwen2's vocabulary with Qwen 2.5's added tokens: Qwen3 added
	// <think>, </think>, <tool_response> and </tool_response>, which Qwen
	// 2.5's tokenizer reads as ordinary text.
	Qwen25 = "qwen2.5"
	// DeepSeekV3 is the 128,000-token byte-level BPE of DeepSeek V3 and R1
	// (its own three-stage pre-tokenizer). MIT; embedded.
	DeepSeekV3 = "deepseek_v3"
	// O200KHarmony is gpt-oss's o200k_harmony: o200k_base's text encoding
	// plus the harmony special tokens (which only chat framing emits).
	O200KHarmony = "o200k_harmony"
)

// VocabDirEnv names the directory that holds imported vocabularies.
const VocabDirEnv = "CONTEXTD_TOKENIZERS_DIR"

//go:embed vocab/*.bpe.gz
var embeddedVocab embed.FS

// bpeFamily describes one open-weight byte-level BPE encoding.
type bpeFamily struct {
	piece     func(s string, i int) int
	normalize func(string) string // nil: none
	embedded  bool                // the vocabulary ships in the binary
	// splits are the regexes of the tokenizer.json pre_tokenizer's Split
	// steps, in order, and normalizer its normalizer type ("" for none),
	// which the importer requires.
	splits     []string
	normalizer string
	// fallbackError is the expected error of cl100k_base against this
	// encoding, used when its vocabulary is not available.
	fallbackError float64
}

var bpeFamilies = map[string]bpeFamily{
	Llama3: {
		piece:         pieceCL100K,
		splits:        []string{`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`},
		fallbackError: 0.10,
	},
	Qwen2: {
		piece:         pieceQwen2,
		normalize:     nfc,
		embedded:      true,
		splits:        []string{`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`},
		normalizer:    "NFC",
		fallbackError: 0.15,
	},
	DeepSeekV3: {
		piece:    pieceDeepSeekV3,
		embedded: true,
		splits: []string{
			`\p{N}{1,3}`,
			`[一-龥぀-ゟ゠-ヿ]+`,
			"[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
		},
		fallbackError: 0.15,
	},
}

// ImportableEncodings lists the encodings ImportTokenizerJSON converts.
func ImportableEncodings() []string {
	out := []string{Gemma3}
	for name, f := range bpeFamilies {
		if len(f.splits) > 0 {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// VocabFile is the file name of an encoding's compact vocabulary.
func VocabFile(encoding string) string {
	if encoding == Gemma3 {
		return encoding + ".spm.gz"
	}
	return encoding + ".bpe.gz"
}

// loadFamily builds an open-weight encoding from the embedded vocabulary or,
// failing that, from dir.
func loadFamily(name, dir string) (*Encoding, error) {
	fam := bpeFamilies[name]
	var data []byte
	var err error
	if fam.embedded {
		data, err = embeddedVocab.ReadFile("vocab/" + VocabFile(name))
	} else {
		if dir == "" {
			return nil, fmt.Errorf("%s: %w: set %s to a directory holding %s (see docs/tokens.md: importing a tokenizer)", name, ErrVocabMissing, VocabDirEnv, VocabFile(name))
		}
		data, err = os.ReadFile(filepath.Join(dir, VocabFile(name)))
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("%s: %w: %s has no %s (see docs/tokens.md: importing a tokenizer)", name, ErrVocabMissing, dir, VocabFile(name))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	v, err := readVocab(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &Encoding{name: name, piece: fam.piece, normalize: fam.normalize, merger: newFamilyMerger(v.ranks), added: newAddedTokens(v.added)}, nil
}

// ErrVocabMissing is returned for an encoding whose vocabulary is neither
// embedded nor imported.
var ErrVocabMissing = fmt.Errorf("vocabulary not available")

// nfc returns s in Unicode Normalization Form C, without copying when it
// already is (the common case).
func nfc(s string) string {
	if norm.NFC.IsNormalString(s) {
		return s
	}
	return norm.NFC.String(s)
}

// ImportFile converts the tokenizer.json at src into dir/<encoding>.bpe.gz
// (written to a temporary file first, then renamed) and returns its path.
func ImportFile(encoding, src, dir string) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	dst := filepath.Join(dir, VocabFile(encoding))
	tmp, err := os.CreateTemp(dir, VocabFile(encoding)+".*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if err := ImportTokenizerJSON(encoding, in, tmp); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	return dst, os.Rename(tmp.Name(), dst)
}

// addedTokens are a tokenizer's added tokens (<|im_start|>, <think>, ...),
// which the model's tokenizer matches in text before anything else, leftmost
// and longest first. All of them start with '<' (the importer checks).
type addedTokens struct {
	ids    map[string]int32
	maxLen int
}

func newAddedTokens(ids map[string]int32) *addedTokens {
	if len(ids) == 0 {
		return nil
	}
	a := &addedTokens{ids: ids}
	for t := range ids {
		a.maxLen = max(a.maxLen, len(t))
	}
	return a
}

// next returns the position, length and id of the first added token in
// text[i:], or -1. Each '<' costs at most maxLen lookups, so the scan is
// linear in the text.
func (a *addedTokens) next(text string, i int) (int, int, int32) {
	for i < len(text) {
		k := strings.IndexByte(text[i:], '<')
		if k < 0 {
			return -1, 0, 0
		}
		i += k
		for l := min(a.maxLen, len(text)-i); l >= 2; l-- {
			if id, ok := a.ids[text[i:i+l]]; ok {
				return i, l, id
			}
		}
		i++
	}
	return -1, 0, 0
}

// segments calls text for each stretch of ordinary text (normalized) and
// added for each added token, in order.
func (e *Encoding) segments(text string, ordinary func(string), added func(string, int32)) {
	for i := 0; i < len(text); {
		at, l, id := e.added.next(text, i)
		if at < 0 {
			at = len(text)
		}
		if at > i {
			seg := text[i:at]
			if e.normalize != nil {
				seg = e.normalize(seg)
			}
			ordinary(seg)
		}
		if at == len(text) {
			return
		}
		added(text[at:at+l], id)
		i = at + l
	}
}

// harmonyAdded are the added tokens of gpt-oss's tokenizer.json
// (o200k_harmony): o200k_base's vocabulary ends at 199997.
// qwen3AddedTokens are the added tokens Qwen3's tokenizer has and Qwen
// 2.5's has not.
var qwen3AddedTokens = []string{"<think>", "</think>", "<tool_response>", "</tool_response>"}

// without returns the added tokens less some; a nil receiver stays nil.
func (a *addedTokens) without(tokens ...string) *addedTokens {
	if a == nil {
		return nil
	}
	ids := make(map[string]int32, len(a.ids))
	for t, id := range a.ids {
		if !slices.Contains(tokens, t) {
			ids[t] = id
		}
	}
	return newAddedTokens(ids)
}

func harmonyAdded() *addedTokens {
	ids := map[string]int32{
		"<|startoftext|>": 199998, "<|endoftext|>": 199999, "<|return|>": 200002,
		"<|constrain|>": 200003, "<|channel|>": 200005, "<|start|>": 200006, "<|end|>": 200007,
		"<|message|>": 200008, "<|call|>": 200012, "<|endofprompt|>": 200018,
	}
	for _, id := range []int32{200000, 200001, 200004, 200009, 200010, 200011, 200013, 200014, 200015, 200016, 200017} {
		ids[fmt.Sprintf("<|reserved_%d|>", id)] = id
	}
	return newAddedTokens(ids)
}

// newFamilyMerger is newMerger for a vocabulary that may hold tokens which
// byte-pair merging of their own bytes does not produce (Llama 3 added 28K
// tokens to cl100k_base's: " việc" merges to three tokens). The model's
// tokenizer emits such a token only for a piece that is exactly it
// (ignore_merges), which the rank table still finds; the backtracking encoder
// for long pieces requires every token of its vocabulary to encode to itself,
// so they are left out of it (as rust-gems' bpe does).
func newFamilyMerger(ranks map[string]int32) *merger {
	m := newMerger(ranks)
	var unreachable []string
	for tok, r := range ranks {
		if len(tok) < 2 || len(tok) > smallPiece {
			continue
		}
		n, self := 0, false
		m.mergeSmall(tok, func(start, end int) {
			n++
			self = start == 0 && end == len(tok)
		})
		if n != 1 || !self || m.rank(tok) != r {
			unreachable = append(unreachable, tok)
		}
	}
	if len(unreachable) == 0 {
		return m
	}
	reachable := make(map[string]int32, len(ranks)-len(unreachable))
	for tok, r := range ranks {
		reachable[tok] = r
	}
	for _, tok := range unreachable {
		delete(reachable, tok)
	}
	maxLen := m.vocab.maxLen
	m.vocab = newVocab(reachable, newRankTable(reachable))
	m.vocab.maxLen = max(m.vocab.maxLen, maxLen) // whole() still finds the long ones
	return m
}
