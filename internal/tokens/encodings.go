package tokens

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Encodings hands out one shared Encoding per name, each loaded at most once
// on first use. The zero value is not usable; call NewEncodings.
type Encodings struct {
	loaded map[string]*loadOnce // keys fixed at construction; read-only after
	dir    string               // imported vocabularies (CONTEXTD_TOKENIZERS_DIR)
}

type loadOnce struct {
	once sync.Once
	enc  *Encoding
	err  error
}

// NewEncodings returns an empty set; encodings load lazily. dir, if given,
// holds imported vocabularies (CONTEXTD_TOKENIZERS_DIR).
func NewEncodings(dir ...string) *Encodings {
	m := make(map[string]*loadOnce, len(EncodingNames))
	for _, n := range EncodingNames {
		m[n] = &loadOnce{}
	}
	s := &Encodings{loaded: m}
	if len(dir) > 0 {
		s.dir = dir[0]
	}
	return s
}

// ErrUnknownEncoding is returned for an encoding name we do not have.
var ErrUnknownEncoding = fmt.Errorf("unknown encoding (known: %s)", strings.Join(EncodingNames, ", "))

// Get returns the shared encoding of that name.
func (s *Encodings) Get(name string) (*Encoding, error) {
	l, ok := s.loaded[name]
	if !ok {
		return nil, fmt.Errorf("%q: %w", name, ErrUnknownEncoding)
	}
	l.once.Do(func() {
		if name == O200KHarmony { // o200k_base's text encoding: share it
			var base *Encoding
			if base, l.err = s.Get(O200KBase); l.err == nil {
				l.enc = &Encoding{name: name, piece: base.piece, merger: base.merger, added: harmonyAdded()}
			}
			return
		}
		if name == Qwen25 { // Qwen2's tables, fewer added tokens: share them
			var base *Encoding
			if base, l.err = s.Get(Qwen2); l.err == nil {
				l.enc = &Encoding{name: name, piece: base.piece, normalize: base.normalize, merger: base.merger,
					added: base.added.without(qwen3AddedTokens...)}
			}
			return
		}
		l.enc, l.err = LoadEncodingFrom(name, s.dir)
	})
	return l.enc, l.err
}

// Available reports, without loading it, whether the vocabulary of an
// encoding is at hand: embedded, or imported into the directory.
func (s *Encodings) Available(name string) bool {
	if _, ok := s.loaded[name]; !ok {
		return false
	}
	if fam, ok := bpeFamilies[name]; (!ok && name != Gemma3) || fam.embedded {
		return true
	}
	if s.dir == "" {
		return false
	}
	_, err := os.Stat(filepath.Join(s.dir, VocabFile(name)))
	return err == nil
}

// Preload loads OpenAI's encodings now, so the first request does not pay for
// them. The open-weight families load on first use, so that a server that
// never counts for them does not hold their tables.
func (s *Encodings) Preload() error {
	for _, n := range []string{CL100KBase, O200KBase} {
		if _, err := s.Get(n); err != nil {
			return err
		}
	}
	return nil
}
