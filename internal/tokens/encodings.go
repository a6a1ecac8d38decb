package tokens

import (
	"fmt"
	"strings"
	"sync"
)

// Encodings hands out one shared Encoding per name, each loaded at most once
// on first use. The zero value is not usable; call NewEncodings.
type Encodings struct {
	loaded map[string]*loadOnce // keys fixed at construction; read-only after
}

type loadOnce struct {
	once sync.Once
	enc  *Encoding
	err  error
}

// NewEncodings returns an empty set; encodings load lazily.
func NewEncodings() *Encodings {
	m := make(map[string]*loadOnce, len(EncodingNames))
	for _, n := range EncodingNames {
		m[n] = &loadOnce{}
	}
	return &Encodings{loaded: m}
}

// ErrUnknownEncoding is returned for an encoding name we do not have.
var ErrUnknownEncoding = fmt.Errorf("unknown encoding (known: %s)", strings.Join(EncodingNames, ", "))

// Get returns the shared encoding of that name.
func (s *Encodings) Get(name string) (*Encoding, error) {
	l, ok := s.loaded[name]
	if !ok {
		return nil, fmt.Errorf("%q: %w", name, ErrUnknownEncoding)
	}
	l.once.Do(func() { l.enc, l.err = LoadEncoding(name) })
	return l.enc, l.err
}

// Preload loads every encoding now, so the first request does not pay for it.
func (s *Encodings) Preload() error {
	for _, n := range EncodingNames {
		if _, err := s.Get(n); err != nil {
			return err
		}
	}
	return nil
}
