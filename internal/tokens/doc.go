// Package tokens owns token accounting: the tiktoken encodings (o200k_base and
// cl100k_base, exact and linear-time), the model registry, and the framing
// rules that turn a chat request (system prompt, tool definitions, messages)
// into a token count.
//
// The encodings are our own engine over the vocabularies embedded in
// github.com/pkoukk/tiktoken-go-loader: a hand-written pre-tokenizer
// equivalent to each encoding's split pattern (split.go), and byte-pair
// merging (bpe.go): tiktoken's own scan for short pieces, and for long ones
// the backtracking encoder of GitHub's rust-gems bpe crate (backtrack.go),
// which gives the same tokens in linear time and memory. pkoukk/tiktoken-go
// remains the reference in tests.
package tokens
