package tokens

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"unicode/utf8"
)

// Gemma3 is Gemma 3's 262,144-token SentencePiece BPE with byte fallback
// (tokenizer.json: spaces become "▁", no pre-tokenizer). Its licence (the
// Gemma Terms of Use) binds redistributors, so it is not embedded: import it
// into CONTEXTD_TOKENIZERS_DIR (see docs/tokens.md).
const Gemma3 = "gemma3"

// The compact vocabulary of a SentencePiece BPE (gemma3.spm.gz): gzip of the
// magic "CTXDSPM1", a uvarint count n and for each token id 0..n-1 a uvarint
// length and the token's text; a uvarint count of merges and for each, in
// rank order, the uvarint ids of its left and right token; then a uvarint
// count of added tokens, each a uvarint id, length and text.
const spMagic = "CTXDSPM1"

// maxMerges bounds the merges a vocabulary file may declare.
const maxMerges = 1 << 22

// spFile is a decoded SentencePiece vocabulary.
type spFile struct {
	pieces []string
	merges [][2]int32
	added  map[string]int32
}

func writeSPFile(w io.Writer, f spFile) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(zw)
	bw.WriteString(spMagic)
	var tmp [binary.MaxVarintLen64]byte
	uv := func(v uint64) { bw.Write(tmp[:binary.PutUvarint(tmp[:], v)]) }
	uv(uint64(len(f.pieces)))
	for _, p := range f.pieces {
		uv(uint64(len(p)))
		bw.WriteString(p)
	}
	uv(uint64(len(f.merges)))
	for _, mg := range f.merges {
		uv(uint64(mg[0]))
		uv(uint64(mg[1]))
	}
	uv(uint64(len(f.added)))
	for _, id := range sortedIDs(f.added) {
		uv(uint64(id.id))
		uv(uint64(len(id.text)))
		bw.WriteString(id.text)
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return zw.Close()
}

type idText struct {
	id   int32
	text string
}

func sortedIDs(m map[string]int32) []idText {
	out := make([]idText, 0, len(m))
	for t, id := range m {
		out = append(out, idText{id, t})
	}
	for i := 1; i < len(out); i++ { // insertion sort keeps the file deterministic
		for j := i; j > 0 && out[j].id < out[j-1].id; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func readSPFile(r io.Reader) (spFile, error) {
	var f spFile
	br, n, err := openVocab(r, spMagic)
	if err != nil {
		return f, err
	}
	f.pieces = make([]string, n)
	buf := make([]byte, 0, 1024)
	for id := range n {
		l, err := binary.ReadUvarint(br)
		if err != nil || l > 1024 {
			return f, fmt.Errorf("vocabulary: token %d: bad length", id)
		}
		buf = buf[:l]
		if _, err := io.ReadFull(br, buf); err != nil {
			return f, fmt.Errorf("vocabulary: token %d: %w", id, err)
		}
		f.pieces[id] = string(buf)
	}
	nm, err := binary.ReadUvarint(br)
	if err != nil || nm > maxMerges {
		return f, errors.New("vocabulary: bad merge count")
	}
	f.merges = make([][2]int32, nm)
	for i := range f.merges {
		for k := range 2 {
			id, err := binary.ReadUvarint(br)
			if err != nil || id >= n {
				return f, fmt.Errorf("vocabulary: merge %d: bad token id", i)
			}
			f.merges[i][k] = int32(id)
		}
	}
	f.added, err = readAdded(br)
	return f, err
}

// newSPModel builds the engine's tables from a vocabulary file's contents.
func newSPModel(f spFile) (*spModel, error) {
	m := &spModel{
		chars: newTable(1 << 14),
		join:  newTable(1 << 14),
		pairs: newPairTable(len(f.merges)),
	}
	whole := make(map[string]int32, len(f.pieces))
	ids := make(map[string]int32, len(f.pieces))
	for i := range m.ascii {
		m.ascii[i] = -1
	}
	for i := range m.bytes {
		m.bytes[i] = -1
	}
	for id, p := range f.pieces {
		if p == "" {
			continue
		}
		ids[p] = int32(id)
		var b int
		if len(p) == 6 && p[:3] == "<0x" && p[5] == '>' {
			if _, err := fmt.Sscanf(p[3:5], "%02X", &b); err == nil {
				m.bytes[b] = int32(id)
			}
		}
		n := 0
		prev := rune(-1)
		for _, r := range p {
			if prev >= 0 {
				m.setJoined(prev, r)
			}
			prev = r
			n++
		}
		if n == 1 {
			if prev < 128 {
				m.ascii[prev] = int32(id)
			} else {
				m.chars.put(uint64(prev)+1, int32(id))
			}
		}
		m.maxChars = max(m.maxChars, n)
	}
	for b, id := range m.bytes {
		if id < 0 {
			return nil, fmt.Errorf("vocabulary: no byte-fallback token <0x%02X>", b)
		}
	}
	isByte := make(map[int32]bool, len(m.bytes))
	for _, id := range m.bytes {
		isByte[id] = true
	}
	for rank, mg := range f.merges {
		// The engine never merges a character's byte-fallback tokens (an
		// unknown character stays one symbol), so it refuses a merge list
		// that would.
		if isByte[mg[0]] || isByte[mg[1]] {
			return nil, fmt.Errorf("vocabulary: merge %d joins a byte-fallback token (%q, %q), which is not supported", rank, f.pieces[mg[0]], f.pieces[mg[1]])
		}
		merged, ok := ids[f.pieces[mg[0]]+f.pieces[mg[1]]]
		if !ok {
			return nil, fmt.Errorf("vocabulary: merge %d makes %q, which is not a token", rank, f.pieces[mg[0]]+f.pieces[mg[1]])
		}
		// A pair listed twice keeps its last rank, as transformers.js's
		// and Hugging Face's maps do.
		if mg[0] == 0 && mg[1] == 0 {
			return nil, fmt.Errorf("vocabulary: merge %d joins token 0 with itself", rank)
		}
		m.pairs.put(uint64(mg[0])<<32|uint64(mg[1]), uint64(rank)<<32|uint64(merged))
	}
	for i := range 129 {
		for j := range 129 {
			a, b := rune(i), rune(j)
			if i == 128 {
				a = spSpace
			}
			if j == 128 {
				b = spSpace
			}
			m.asciiPairs[i*129+j] = m.pair(m.charID(a), m.charID(b))
		}
	}
	m.added = newSPAdded(f.added)
	// The tokens that merging their own characters yields are looked up
	// whole. Computed here, on the stack, in 0.2–0.4 s of CPU.
	m.maxBytes = spMaxWhole - len("▁")
	var s spSink
	s.encode = true
	for id, p := range f.pieces {
		n := utf8.RuneCountInString(p)
		if p == "" || len(p) > m.maxBytes || n > spSmall || !utf8.ValidString(p) {
			continue
		}
		s.ids, s.n = s.ids[:0], 0
		m.mergeShort(p, n, &s)
		if len(s.ids) == 1 && s.ids[0] == id {
			whole[p] = int32(id)
		}
	}
	longest := 0
	for p := range whole {
		longest = max(longest, len(p))
	}
	m.maxBytes = longest
	m.whole = newRankTable(whole)
	return m, nil
}

// loadSentencePiece reads dir/gemma3.spm.gz.
func loadSentencePiece(name, dir string) (*Encoding, error) {
	how := fmt.Sprintf("import it with `contextd tokenizer import -encoding %s -dir DIR path/to/tokenizer.json` and serve with %s=DIR", name, VocabDirEnv)
	if dir == "" {
		return nil, fmt.Errorf("%s: %w: %s", name, ErrVocabMissing, how)
	}
	fh, err := os.Open(filepath.Join(dir, VocabFile(name)))
	if os.IsNotExist(err) {
		return nil, fmt.Errorf("%s: %w: %s has no %s; %s", name, ErrVocabMissing, dir, VocabFile(name), how)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	defer fh.Close()
	f, err := readSPFile(fh)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	m, err := newSPModel(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &Encoding{name: name, sp: m}, nil
}

// hfSentencePiece is the part of a SentencePiece-style tokenizer.json the
// importer reads.
type hfSentencePiece struct {
	AddedTokens []struct {
		addedToken
		Normalized bool `json:"normalized"`
	} `json:"added_tokens"`
	Normalizer   json.RawMessage `json:"normalizer"`
	PreTokenizer json.RawMessage `json:"pre_tokenizer"`
	Model        struct {
		Type                    string            `json:"type"`
		Vocab                   map[string]int    `json:"vocab"`
		Merges                  []json.RawMessage `json:"merges"`
		ByteFallback            bool              `json:"byte_fallback"`
		IgnoreMerges            bool              `json:"ignore_merges"`
		Dropout                 *float64          `json:"dropout"`
		ContinuingSubwordPrefix *string           `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string           `json:"end_of_word_suffix"`
	} `json:"model"`
}

// spStep is a normalizer or pre-tokenizer step of a SentencePiece-style
// tokenizer.json.
type spStep struct {
	Type    string `json:"type"`
	Pattern struct {
		String *string `json:"String"`
		Regex  *string `json:"Regex"`
	} `json:"pattern"`
	Content  string `json:"content"`
	Behavior string `json:"behavior"`
	Invert   bool   `json:"invert"`
}

// importSentencePiece converts a Gemma 3 tokenizer.json. It refuses a file
// whose normalizer is not "space to ▁", whose pre-tokenizer does more than
// split on spaces (which that normalizer has removed), whose model is not a
// byte-fallback BPE, whose merges join byte-fallback tokens, or whose added
// tokens strip or are normalized — the
// engine implements exactly that tokenizer.
func importSentencePiece(r io.Reader, w io.Writer) error {
	var tj hfSentencePiece
	if err := json.NewDecoder(r).Decode(&tj); err != nil {
		return fmt.Errorf("parse tokenizer.json: %w", err)
	}
	md := tj.Model
	switch {
	case md.Type != "BPE":
		return fmt.Errorf("tokenizer.json: model type %q, want BPE", md.Type)
	case !md.ByteFallback:
		return errors.New("tokenizer.json: the BPE has no byte_fallback, which a SentencePiece vocabulary has")
	case md.IgnoreMerges || md.Dropout != nil && *md.Dropout != 0 ||
		md.ContinuingSubwordPrefix != nil && *md.ContinuingSubwordPrefix != "" || md.EndOfWordSuffix != nil && *md.EndOfWordSuffix != "":
		return errors.New("tokenizer.json: ignore_merges, dropout, continuing_subword_prefix and end_of_word_suffix are not supported")
	}
	var norm spStep
	if err := json.Unmarshal(tj.Normalizer, &norm); err != nil || norm.Type != "Replace" || norm.Pattern.String == nil ||
		*norm.Pattern.String != " " || norm.Content != "▁" {
		return fmt.Errorf("tokenizer.json: normalizer %s is not Replace \" \" with \"▁\"", tj.Normalizer)
	}
	if len(tj.PreTokenizer) > 0 && string(tj.PreTokenizer) != "null" {
		var pre spStep
		if err := json.Unmarshal(tj.PreTokenizer, &pre); err != nil || pre.Type != "Split" || pre.Pattern.String == nil ||
			*pre.Pattern.String != " " || pre.Invert || pre.Behavior == "Removed" {
			return fmt.Errorf("tokenizer.json: pre_tokenizer %s is not supported (only a Split on \" \", which the normalizer leaves nothing to split)", tj.PreTokenizer)
		}
	}
	n := len(md.Vocab)
	if n == 0 || n > maxVocab {
		return fmt.Errorf("tokenizer.json: %d tokens", n)
	}
	f := spFile{pieces: make([]string, n), added: make(map[string]int32, len(tj.AddedTokens))}
	for p, id := range md.Vocab {
		if id < 0 || id >= n || f.pieces[id] != "" {
			return fmt.Errorf("tokenizer.json: token ids are not 0..%d", n-1)
		}
		if p == "" || len(p) > 1024 {
			return fmt.Errorf("tokenizer.json: token %d has length %d", id, len(p))
		}
		f.pieces[id] = p
	}
	if len(md.Merges) > maxMerges {
		return fmt.Errorf("tokenizer.json: %d merges", len(md.Merges))
	}
	f.merges = make([][2]int32, len(md.Merges))
	for i, raw := range md.Merges {
		left, right, err := parseMerge(raw)
		if err != nil {
			return fmt.Errorf("tokenizer.json: merge %d: %w", i, err)
		}
		l, okL := md.Vocab[left]
		rt, okR := md.Vocab[right]
		if _, ok := md.Vocab[left+right]; !okL || !okR || !ok {
			return fmt.Errorf("tokenizer.json: merge %d (%q, %q) names a token the vocabulary lacks", i, left, right)
		}
		f.merges[i] = [2]int32{int32(l), int32(rt)}
	}
	for _, a := range tj.AddedTokens {
		switch {
		case a.SingleWord || a.LStrip || a.RStrip || a.Normalized:
			return fmt.Errorf("tokenizer.json: added token %q strips, matches single words or is normalized, which is not supported", a.Content)
		case a.Content == "" || len(a.Content) > 1024 || a.ID < 0 || a.ID >= maxVocab:
			return fmt.Errorf("tokenizer.json: added token %d (%q) is out of range", a.ID, a.Content)
		}
		f.added[a.Content] = int32(a.ID)
	}
	if _, err := newSPModel(f); err != nil { // byte fallback complete, merges valid
		return fmt.Errorf("tokenizer.json: %w", err)
	}
	return writeSPFile(w, f)
}
