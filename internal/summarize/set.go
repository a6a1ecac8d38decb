package summarize

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
)

// ErrUnknownSummarizer is a summarizer spec this server cannot serve.
var ErrUnknownSummarizer = errors.New("unknown summarizer")

// ErrNotAllowed is a summarizer spec the server's allow-list does not hold.
var ErrNotAllowed = errors.New("summarizer not allowed")

// ErrEmptyAnswer is an LLM answer without text.
var ErrEmptyAnswer = errors.New("empty answer")

// maxClients bounds the LLM clients a Set keeps (least recently used go
// first): tenants choose specs, so their number is not the server's to know.
const maxClients = 64

// Set resolves summarizer specs: "extractive", "openai:MODEL" or
// "anthropic:MODEL", for the providers the server has endpoints for and, when
// an allow-list is set, only the specs on it.
type Set struct {
	Default   string
	endpoints map[string]Endpoint
	allowed   []string // nil: any spec of a configured provider

	mu      sync.Mutex
	clients map[string]*list.Element // spec → element of lru holding a client
	lru     *list.List               // of *cached, most recently used first
}

type cached struct {
	spec string
	s    Summarizer
}

// NewSet returns a set with endpoints per provider and a default spec.
func NewSet(def string, endpoints map[string]Endpoint) (*Set, error) {
	s := &Set{Default: def, endpoints: endpoints, clients: map[string]*list.Element{}, lru: list.New()}
	if def == "" {
		s.Default = "extractive"
	}
	if _, _, err := s.Get(s.Default); err != nil {
		return nil, err
	}
	return s, nil
}

// Allow restricts the specs tenants may name (Resolve) to specs; an entry
// "PROVIDER:*" allows every model of a provider. The default spec and
// "extractive" are always allowed.
func (s *Set) Allow(specs []string) {
	s.allowed = append([]string{"extractive", s.Default}, specs...)
}

// Allowed reports whether a tenant may name spec ("" is the default).
func (s *Set) Allowed(spec string) bool {
	if spec == "" || s.allowed == nil {
		return true
	}
	provider, _, _ := strings.Cut(spec, ":")
	return slices.Contains(s.allowed, spec) || slices.Contains(s.allowed, provider+":*")
}

// Resolve is Get for a spec a tenant named: one off the allow-list is
// ErrNotAllowed, naming what is allowed.
func (s *Set) Resolve(spec string) (Summarizer, bool, error) {
	if !s.Allowed(spec) {
		return nil, false, fmt.Errorf("%w: %q is not one this server lets sessions use; allowed: %s", ErrNotAllowed, spec, strings.Join(s.allowed, ", "))
	}
	return s.Get(spec)
}

// Get returns the summarizer of a spec ("" means the default) and whether it
// is an LLM (its output then gets PinFacts and an extractive fallback).
func (s *Set) Get(spec string) (Summarizer, bool, error) {
	if spec == "" {
		spec = s.Default
	}
	if spec == "extractive" {
		return Extractive{}, false, nil
	}
	provider, model, ok := strings.Cut(spec, ":")
	if !ok || model == "" {
		return nil, false, fmt.Errorf("%w %q: want \"extractive\", \"openai:MODEL\" or \"anthropic:MODEL\"", ErrUnknownSummarizer, spec)
	}
	ep, configured := s.endpoints[provider]
	if !configured {
		return nil, false, fmt.Errorf("%w %q: provider %q is not configured on this server", ErrUnknownSummarizer, spec, provider)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if el, ok := s.clients[spec]; ok {
		s.lru.MoveToFront(el)
		return el.Value.(*cached).s, true, nil
	}
	var c Summarizer
	switch provider {
	case ProviderOpenAI:
		c = NewOpenAI(ep, model)
	case ProviderAnthropic:
		c = NewAnthropic(ep, model)
	default:
		return nil, false, fmt.Errorf("%w %q", ErrUnknownSummarizer, spec)
	}
	s.clients[spec] = s.lru.PushFront(&cached{spec: spec, s: c})
	for s.lru.Len() > maxClients {
		oldest := s.lru.Back()
		s.lru.Remove(oldest)
		delete(s.clients, oldest.Value.(*cached).spec)
	}
	return c, true, nil
}

// Clients is how many LLM clients the set holds.
func (s *Set) Clients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lru.Len()
}

// PublicError is what a tenant is told about a failed LLM call: the kind of
// failure only. The provider's text (URLs, account or request ids, raw
// bodies) stays in the server's log.
func PublicError(err error) string {
	var oe *openai.Error
	var ae *anthropic.Error
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return "the summarizer timed out"
	case errors.Is(err, context.Canceled):
		return "the summarizer call was canceled"
	case errors.As(err, &oe):
		return fmt.Sprintf("the summarizer's provider answered HTTP %d", oe.StatusCode)
	case errors.As(err, &ae):
		return fmt.Sprintf("the summarizer's provider answered HTTP %d", ae.StatusCode)
	case errors.Is(err, ErrEmptyAnswer):
		return "the summarizer returned an empty answer"
	}
	return "the summarizer call failed"
}

// LogDetail is the full story of a failed LLM call, for the server's log
// only: the error and, when the provider answered, its raw error body (the
// OpenAI client leaves the body out of its error text).
func LogDetail(err error) string {
	var oe *openai.Error
	if errors.As(err, &oe) && oe.RawJSON() != "" {
		return err.Error() + "; provider said: " + oe.RawJSON()
	}
	return err.Error()
}
