package app

import "github.com/contextd/contextd/internal/summarize"

// SummarizerEndpoints returns the LLM providers cfg reaches, as the server
// builds its summarizers from them (the recall benchmark's judge asks its
// questions through the same settings: cmd/costbench -judge).
func SummarizerEndpoints(cfg Config) map[string]summarize.Endpoint { return summarizerEndpoints(cfg) }
