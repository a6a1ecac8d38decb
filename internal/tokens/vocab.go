package tokens

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"
)

// The compact vocabulary format of the open-weight byte-level BPE families
// (files named <encoding>.bpe.gz, embedded or in CONTEXTD_TOKENIZERS_DIR):
// gzip of the magic "CTXDBPE1", a uvarint count n, then for each token id
// 0..n-1 a uvarint length and the token's bytes. Length 0 marks an id that
// byte-pair merging never produces (a special token, or a hole). Then a
// uvarint count of added tokens, each a uvarint id, a uvarint length and its
// text: the tokenizer's added tokens, matched in text before pre-tokenizing
// as the model's tokenizer does. The rank of
// a token is its id, which is what tiktoken's algorithm needs; the importer
// checks that the tokenizer.json's merge order agrees with the ids.
const vocabMagic = "CTXDBPE1"

// maxVocab bounds the number of tokens a vocabulary file may declare.
const maxVocab = 1 << 20

// vocabulary is a decoded vocabulary file.
type vocabulary struct {
	ranks map[string]int32
	added map[string]int32
}

// readVocab decodes a compact vocabulary.
func readVocab(r io.Reader) (vocabulary, error) {
	var v vocabulary
	br, n, err := openVocab(r, vocabMagic)
	if err != nil {
		return v, err
	}
	ranks := make(map[string]int32, n)
	buf := make([]byte, 0, 256)
	for id := range n {
		l, err := binary.ReadUvarint(br)
		if err != nil || l > 1024 {
			return v, fmt.Errorf("vocabulary: token %d: bad length", id)
		}
		if l == 0 {
			continue
		}
		buf = buf[:l]
		if _, err := io.ReadFull(br, buf); err != nil {
			return v, fmt.Errorf("vocabulary: token %d: %w", id, err)
		}
		ranks[string(buf)] = int32(id)
	}
	v.ranks = ranks
	v.added, err = readAdded(br)
	return v, err
}

// openVocab starts reading a gzipped vocabulary file: it checks the magic
// and returns the token count that follows it.
func openVocab(r io.Reader, magic string) (*bufio.Reader, uint64, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, 0, fmt.Errorf("vocabulary: %w", err)
	}
	br := bufio.NewReader(zr)
	got := make([]byte, len(magic))
	if _, err := io.ReadFull(br, got); err != nil || string(got) != magic {
		return nil, 0, fmt.Errorf("vocabulary: not a contextd vocabulary (want magic %q)", magic)
	}
	n, err := binary.ReadUvarint(br)
	if err != nil || n > maxVocab {
		return nil, 0, errors.New("vocabulary: bad token count")
	}
	return br, n, nil
}

// readAdded reads a vocabulary file's added tokens: a uvarint count, then
// each a uvarint id, length and text.
func readAdded(br *bufio.Reader) (map[string]int32, error) {
	n, err := binary.ReadUvarint(br)
	if err != nil || n > maxVocab {
		return nil, errors.New("vocabulary: bad added-token count")
	}
	added := make(map[string]int32, n)
	buf := make([]byte, 0, 1024)
	for range n {
		id, err := binary.ReadUvarint(br)
		if err != nil || id >= maxVocab {
			return nil, errors.New("vocabulary: bad added-token id")
		}
		l, err := binary.ReadUvarint(br)
		if err != nil || l == 0 || l > 1024 {
			return nil, fmt.Errorf("vocabulary: added token %d: bad length", id)
		}
		buf = buf[:l]
		if _, err := io.ReadFull(br, buf); err != nil {
			return nil, fmt.Errorf("vocabulary: added token %d: %w", id, err)
		}
		added[string(buf)] = int32(id)
	}
	return added, nil
}

// addedToken is one entry of a tokenizer.json's added_tokens.
type addedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
}

// writeVocab encodes tokens (indexed by id; nil or empty for none) and the
// added tokens.
func writeVocab(w io.Writer, tokens [][]byte, added []addedToken) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(zw)
	bw.WriteString(vocabMagic)
	var tmp [binary.MaxVarintLen64]byte
	bw.Write(tmp[:binary.PutUvarint(tmp[:], uint64(len(tokens)))])
	for _, t := range tokens {
		bw.Write(tmp[:binary.PutUvarint(tmp[:], uint64(len(t)))])
		bw.Write(t)
	}
	bw.Write(tmp[:binary.PutUvarint(tmp[:], uint64(len(added)))])
	for _, a := range added {
		bw.Write(tmp[:binary.PutUvarint(tmp[:], uint64(a.ID))])
		bw.Write(tmp[:binary.PutUvarint(tmp[:], uint64(len(a.Content)))])
		bw.WriteString(a.Content)
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return zw.Close()
}

// hfTokenizer is the part of a Hugging Face tokenizer.json the importer reads.
type hfTokenizer struct {
	AddedTokens  []addedToken    `json:"added_tokens"`
	Normalizer   json.RawMessage `json:"normalizer"`
	PreTokenizer json.RawMessage `json:"pre_tokenizer"`
	Model        struct {
		Type   string            `json:"type"`
		Vocab  map[string]int    `json:"vocab"`
		Merges []json.RawMessage `json:"merges"`
	} `json:"model"`
}

// ImportTokenizerJSON converts a tokenizer.json of the given encoding: a
// byte-level BPE (llama3, qwen2, deepseek_v3) into the compact vocabulary
// format, or Gemma 3's SentencePiece BPE (gemma3, sentencepiece_vocab.go).
// For byte-level BPE it refuses a file whose normalizer or pre-tokenizer is not the one that
// encoding's hand-written pre-tokenizer implements, and a vocabulary whose
// merge order disagrees with its token ids, so a converted file always counts
// exactly.
func ImportTokenizerJSON(encoding string, r io.Reader, w io.Writer) error {
	if encoding == Gemma3 {
		return importSentencePiece(r, w)
	}
	fam, ok := bpeFamilies[encoding]
	if !ok || len(fam.splits) == 0 {
		return fmt.Errorf("encoding %q cannot be imported (importable: %s)", encoding, strings.Join(ImportableEncodings(), ", "))
	}
	var tj hfTokenizer
	if err := json.NewDecoder(r).Decode(&tj); err != nil {
		return fmt.Errorf("parse tokenizer.json: %w", err)
	}
	if tj.Model.Type != "BPE" {
		return fmt.Errorf("tokenizer.json: model type %q, want BPE", tj.Model.Type)
	}
	splits, norm, err := preTokenizerOf(tj.PreTokenizer, tj.Normalizer)
	if err != nil {
		return fmt.Errorf("tokenizer.json: %w", err)
	}
	if !slices.Equal(splits, fam.splits) {
		return fmt.Errorf("tokenizer.json: its pre-tokenizer splits on %q, not on %s's %q", splits, encoding, fam.splits)
	}
	if norm != fam.normalizer {
		return fmt.Errorf("tokenizer.json: normalizer %q is not %s's %q", norm, encoding, fam.normalizer)
	}
	dec := byteDecoder()
	tokens := make([][]byte, 0, len(tj.Model.Vocab))
	produced := make(map[string]bool, len(tj.Model.Merges))
	lastID := -1
	for i, raw := range tj.Model.Merges {
		left, right, err := parseMerge(raw)
		if err != nil {
			return fmt.Errorf("tokenizer.json: merge %d: %w", i, err)
		}
		tok := left + right
		id, ok := tj.Model.Vocab[tok]
		if !ok {
			return fmt.Errorf("tokenizer.json: merge %d makes %q, which is not in the vocabulary", i, tok)
		}
		if produced[tok] {
			continue // tiktoken-derived files list every split of a token
		}
		if id < lastID {
			return fmt.Errorf("tokenizer.json: merge %d makes token %d after token %d: merge order and ids disagree", i, id, lastID)
		}
		produced[tok], lastID = true, id
	}
	for s, id := range tj.Model.Vocab {
		if id < 0 || id >= maxVocab {
			return fmt.Errorf("tokenizer.json: token id %d out of range", id)
		}
		if utf8.RuneCountInString(s) > 1 && !produced[s] {
			continue // unreachable by merging (a special token)
		}
		b, ok := decodeByteLevel(dec, s)
		if !ok {
			return fmt.Errorf("tokenizer.json: token %q is not byte-level", s)
		}
		for len(tokens) <= id {
			tokens = append(tokens, nil)
		}
		tokens[id] = b
	}
	for _, a := range tj.AddedTokens {
		switch {
		case a.SingleWord || a.LStrip || a.RStrip:
			return fmt.Errorf("tokenizer.json: added token %q strips or matches single words, which is not supported", a.Content)
		case a.Content == "" || len(a.Content) > 1024 || a.ID < 0 || a.ID >= maxVocab:
			return fmt.Errorf("tokenizer.json: added token %d (%q) is out of range", a.ID, a.Content)
		case a.Content[0] != '<':
			return fmt.Errorf("tokenizer.json: added token %q does not start with '<', which is not supported", a.Content)
		}
	}
	return writeVocab(w, tokens, tj.AddedTokens)
}

// hfStep is one normalizer or pre-tokenizer step of a tokenizer.json.
type hfStep struct {
	Type          string   `json:"type"`
	Normalizers   []hfStep `json:"normalizers"`
	PreTokenizers []hfStep `json:"pretokenizers"`
	Pattern       struct {
		Regex  *string `json:"Regex"`
		String *string `json:"String"`
	} `json:"pattern"`
	Behavior string `json:"behavior"`
	Invert   bool   `json:"invert"`
	UseRegex *bool  `json:"use_regex"`
	// AddPrefixSpace must be false: a ByteLevel step that adds a space
	// changes every count.
	AddPrefixSpace bool `json:"add_prefix_space"`
}

// preTokenizerOf returns the regexes of the Split steps of a pre_tokenizer
// (which must be Splits, isolated, followed by a ByteLevel step that adds no
// regex of its own) and the normalizer's type ("" for none or an empty
// sequence).
func preTokenizerOf(pre, normalizer json.RawMessage) ([]string, string, error) {
	var p hfStep
	if err := json.Unmarshal(pre, &p); err != nil {
		return nil, "", fmt.Errorf("pre_tokenizer: %w", err)
	}
	steps := []hfStep{p}
	if p.Type == "Sequence" {
		steps = p.PreTokenizers
	}
	var splits []string
	for _, st := range steps {
		switch {
		case st.Type == "Split" && st.Pattern.Regex != nil && st.Behavior == "Isolated" && !st.Invert:
			splits = append(splits, *st.Pattern.Regex)
		case st.Type == "ByteLevel" && st.UseRegex != nil && !*st.UseRegex && !st.AddPrefixSpace:
		default:
			return nil, "", fmt.Errorf("pre_tokenizer step %q is not supported", st.Type)
		}
	}
	norm := ""
	if len(normalizer) > 0 && string(normalizer) != "null" {
		var n hfStep
		if err := json.Unmarshal(normalizer, &n); err != nil {
			return nil, "", fmt.Errorf("normalizer: %w", err)
		}
		norm = n.Type
		if n.Type == "Sequence" && len(n.Normalizers) == 0 {
			norm = ""
		}
	}
	return splits, norm, nil
}

func parseMerge(raw json.RawMessage) (string, string, error) {
	var pair []string
	if err := json.Unmarshal(raw, &pair); err == nil {
		if len(pair) != 2 {
			return "", "", errors.New("not a pair")
		}
		return pair[0], pair[1], nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", "", err
	}
	l, r, ok := strings.Cut(s, " ")
	if !ok {
		return "", "", fmt.Errorf("%q is not a pair", s)
	}
	return l, r, nil
}

// byteDecoder inverts GPT-2's bytes_to_unicode: byte-level BPE writes each
// byte as a printable rune.
func byteDecoder() map[rune]byte {
	m := make(map[rune]byte, 256)
	n := 0
	for b := 0; b < 256; b++ {
		printable := ('!' <= b && b <= '~') || (0xA1 <= b && b <= 0xAC) || (0xAE <= b && b <= 0xFF)
		if printable {
			m[rune(b)] = byte(b)
		} else {
			m[rune(256+n)] = byte(b)
			n++
		}
	}
	return m
}

func decodeByteLevel(dec map[rune]byte, s string) ([]byte, bool) {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		b, ok := dec[r]
		if !ok {
			return nil, false
		}
		out = append(out, b)
	}
	return out, true
}
