package tokens_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/contextd/contextd/internal/tokens"
)

// The differential test counts texts and chat requests that no golden file
// holds — generated from a seed to break tokenizers and templates — with the
// reference (tools/tokenizer-golden/count.mjs: the same packages and
// adjustments as golden.mjs) and with internal/tokens, and fails on any
// difference. The seed is fixed so CI is repeatable; CONTEXTD_DIFF_SEED
// explores others.
//
// Size and cost: 2,500 texts (~470 KB; two of them runs of 10,000+
// characters without a space) in six encodings and 300 chat requests in
// seven templates: about 35 s on 2 shared cores, of which the reference
// takes ~25 s (one Node process; loading every tokenizer is ~15 s of it),
// the vocabulary imports most of the rest, and internal/tokens ~2.5 s.

const (
	diffTexts    = 2500
	diffRequests = 300
	diffShown    = 10 // mismatches shown per family
)

// diffSeed is the generator's seed: CONTEXTD_DIFF_SEED, else fixed.
func diffSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(20260522)
	if s := os.Getenv("CONTEXTD_DIFF_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CONTEXTD_DIFF_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (set CONTEXTD_DIFF_SEED to explore others)", seed)
	return seed
}

// referenceCounts pipes inputs (JSON values, one a line) through count.mjs in
// one Node process and returns its rows, in order.
func referenceCounts(t *testing.T, inputs []any) []map[string]*int {
	t.Helper()
	dir := filepath.Join(testdataDir(t), "..", "tools", "tokenizer-golden")
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CONTEXTD_REQUIRE_NODE") == "1" {
			t.Fatalf("node is required: %v", err)
		}
		t.Skipf("node not installed: %v", err)
	}
	cmd := exec.CommandContext(t.Context(), node, "count.mjs")
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	written := make(chan error, 1)
	go func() {
		w := bufio.NewWriter(stdin)
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		for _, in := range inputs {
			if err := enc.Encode(in); err != nil {
				written <- err
				return
			}
		}
		if err := w.Flush(); err != nil {
			written <- err
			return
		}
		written <- stdin.Close()
	}()
	var rows []map[string]*int
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var row map[string]*int
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("count.mjs line %d: %v", len(rows)+1, err)
		}
		rows = append(rows, row)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, stdout)
	if err := <-written; err != nil {
		t.Fatalf("writing to count.mjs: %v", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("count.mjs: %v", err)
	}
	if len(rows) != len(inputs) {
		t.Fatalf("count.mjs wrote %d rows for %d inputs", len(rows), len(inputs))
	}
	return rows
}

// shorten quotes s, cut in the middle when long.
func shorten(s string) string {
	if utf8.RuneCountInString(s) <= 160 {
		return strconv.QuoteToASCII(s)
	}
	r := []rune(s)
	return strconv.QuoteToASCII(string(r[:100])) + fmt.Sprintf("…(%d runes)…", len(r)) + strconv.QuoteToASCII(string(r[len(r)-40:]))
}

// mismatches collects and reports the differences of one family.
type mismatches struct {
	t     *testing.T
	name  string
	n, of int
}

func (m *mismatches) check(got, want int, input func() string) {
	m.of++
	if got == want {
		return
	}
	m.n++
	if m.n <= diffShown {
		m.t.Errorf("%s: ours %d, reference %d: %s", m.name, got, want, input())
	}
}

func (m *mismatches) done() {
	if m.n > 0 {
		m.t.Errorf("%s: %d of %d inputs mismatch", m.name, m.n, m.of)
	}
}

// TestReferenceDiff: generated texts count the same as the reference in
// every open-weight encoding, and generated chat requests the same as
// apply_chat_template in every open-weight template. One Node process
// counts both.
func TestReferenceDiff(t *testing.T) {
	encs := tokens.NewEncodings(importedDir(t))
	seed := diffSeed(t)
	gen := newTextGen(t, rand.New(rand.NewPCG(seed, 1)))
	texts := make([]string, diffTexts)
	inputs := make([]any, 0, diffTexts+diffRequests)
	for i := range texts {
		texts[i] = gen.text(i)
		inputs = append(inputs, map[string]string{"text": texts[i]})
	}
	chatGen := *gen
	chatGen.rng = rand.New(rand.NewPCG(seed, 2))
	chatGen.numbers = diffChatNumbers
	reqs := make([]goldenChat, diffRequests)
	for i := range reqs {
		raw := chatGen.request(i)
		inputs = append(inputs, json.RawMessage(raw))
		reqs[i] = neutralRequest(t, raw)
	}
	start := time.Now()
	rows := referenceCounts(t, inputs)
	t.Logf("%d texts (%d bytes) and %d chat requests counted by the reference in %v",
		len(texts), totalLen(texts), len(reqs), time.Since(start).Round(time.Millisecond))
	t.Run("text", func(t *testing.T) { diffText(t, encs, texts, rows[:len(texts)]) })
	t.Run("chat", func(t *testing.T) { diffChat(t, encs, reqs, inputs[len(texts):], rows[len(texts):]) })
}

// diffText compares each encoding's count of each text with the reference.
func diffText(t *testing.T, encs *tokens.Encodings, texts []string, rows []map[string]*int) {
	start := time.Now()
	for _, name := range openWeightEncodings {
		enc, err := encs.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		m := mismatches{t: t, name: name}
		for i, text := range texts {
			want := rows[i][name]
			if want == nil {
				t.Fatalf("count.mjs has no %s count for text %d", name, i)
			}
			m.check(enc.Count(text), *want, func() string { return fmt.Sprintf("text %d %s", i, shorten(text)) })
		}
		m.done()
	}
	t.Logf("counted by internal/tokens in %v", time.Since(start).Round(time.Millisecond))
}

func totalLen(texts []string) int {
	n := 0
	for _, s := range texts {
		n += len(s)
	}
	return n
}

// textGen generates inputs meant to break tokenizers: pieces of the
// vocabularies themselves, every kind of Unicode white space, digits,
// contractions, punctuation, combining marks and NFC-sensitive sequences,
// emoji, scripts of every shape, control and private-use characters, the
// tokenizers' own added tokens as text, long runs, JSON and code.
type textGen struct {
	rng    *rand.Rand
	pieces []string // vocabulary entries of every family, as text
	added  []string // the families' added tokens
	// numbers are the JSON numbers values are made of, as written.
	numbers []string
}

// diffNumbers are JSON numbers written every way (1.0, 1e5, -0, beyond
// 2^53).
var diffNumbers = []string{"0", "1", "-1", "1.0", "1.5", "-0", "-0.0", "1e5", "1E5", "2.5e-7", "1e21", "1e-7",
	"123456789", "12345678901234567890", "9007199254740993", "0.1", "100.00", "3.14159265358979", "-42", "1e+2",
	"6.02e23", "0.00001"}

func newTextGen(t *testing.T, rng *rand.Rand) *textGen {
	t.Helper()
	g := &textGen{rng: rng, numbers: diffNumbers}
	for _, pkg := range []string{"llama3_1", "qwen3", "deepseek_v3", "gptoss", "gemma3"} {
		pieces, added := vocabSample(t, referenceTokenizer(t, pkg), rng, 400)
		g.pieces = append(g.pieces, pieces...)
		g.added = append(g.added, added...)
	}
	slices.Sort(g.added)
	g.added = slices.Compact(g.added)
	return g
}

// vocabSample reads n random vocabulary entries of a tokenizer.json (byte-
// level entries decoded to their text, SentencePiece ones as written and
// with ▁ as a space) and its added tokens.
func vocabSample(t *testing.T, path string, rng *rand.Rand, n int) (pieces, added []string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tj struct {
		AddedTokens []struct {
			Content string `json:"content"`
		} `json:"added_tokens"`
		Model struct {
			Vocab map[string]int `json:"vocab"`
		} `json:"model"`
		Decoder struct {
			Type string `json:"type"`
		} `json:"decoder"`
	}
	if err := json.Unmarshal(data, &tj); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, a := range tj.AddedTokens {
		if len(added) < 300 || rng.IntN(10) == 0 { // Gemma has thousands of unused ones
			added = append(added, a.Content)
		}
	}
	keys := make([]string, 0, len(tj.Model.Vocab))
	for k := range tj.Model.Vocab {
		keys = append(keys, k)
	}
	slices.Sort(keys) // map order is random; the sample must follow the seed
	byteLevel := tj.Decoder.Type == "ByteLevel"
	dec := byteLevelDecoder()
	for len(pieces) < n {
		k := keys[rng.IntN(len(keys))]
		if !byteLevel {
			if rng.IntN(2) == 0 {
				k = strings.ReplaceAll(k, "▁", " ")
			}
			pieces = append(pieces, k)
			continue
		}
		var b []byte
		ok := true
		for _, r := range k {
			c, found := dec[r]
			ok = ok && found
			b = append(b, c)
		}
		if ok && utf8.Valid(b) {
			pieces = append(pieces, string(b))
		}
	}
	return pieces, added
}

// byteLevelDecoder maps GPT-2's byte-level characters back to bytes.
func byteLevelDecoder() map[rune]byte {
	dec := map[rune]byte{}
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255) {
			dec[rune(b)] = byte(b)
		} else {
			dec[rune(256+n)] = byte(b)
			n++
		}
	}
	return dec
}

// Building blocks. White space: every Unicode White_Space character, and
// the near misses (U+FEFF, U+180E, U+200B) that regex engines disagree on.
var (
	diffSpaces = []string{"\t", "\n", "\v", "\f", "\r", " ", "\u0085", "\u00a0", "\u1680", "\u2000", "\u2001",
		"\u2002", "\u2003", "\u2004", "\u2005", "\u2006", "\u2007", "\u2008", "\u2009", "\u200a", "\u2028", "\u2029",
		"\u202f", "\u205f", "\u3000", "\ufeff", "\u180e", "\u200b", "\r\n", "\n\r", "  ", "\n\n"}
	diffContractions = []string{"'s", "'S", "'t", "'T", "'re", "'RE", "'Re", "'ve", "'VE", "'m", "'M", "'ll", "'LL", "'Ll",
		"'lL", "'d", "'D", "’s", "’ll", "''", "'", "'x", "'", "\"", "`s"}
	diffPunct = []string{".", ",", "!", "?", "...", "…", "—", "–", "-", "--", "->", "=>", "::", ";", ":", "(", ")",
		"[", "]", "{", "}", "<", ">", "</", "/>", "&&", "||", "#", "##", "@", "$", "%", "^", "*", "**", "_", "__",
		"~", "`", "```", "\\", "/", "|", "+", "=", "«", "»", "¿", "¡", "。", "、", "，", "！", "？", "：", "「", "」",
		"『", "（", "）", "·", "•", "§", "¶", "©", "®", "™", "°", "±", "×", "÷", "€", "£", "¥", "₹", "′", "″", "‰"}
	diffMarks = []string{"e\u0301", "E\u0301", "a\u0308", "A\u030a", "\u212b", "\u2126", "o\u0302\u0323", "n\u0303",
		"\u0301", " \u0301", "1\u0301", "\u1100\u1161", "\u1100\u1161\u11a8", "\uac00\u11a8", "\u1112\u1161\u11ab",
		"\u0915\u094d\u0937", "\u0928\u092e\u0938\u094d\u0924\u0947", "\u0e01\u0e34", "\ufb01", "\u00c5", "\u1e9b\u0323",
		"\u0344", "\u0958", "\u2000", "i\u0307", "\u0627\u064b", "\u05d1\u05bc", "\u0dc1\u0dca\u200d\u0dbb"}
	diffEmoji = []string{"😀", "👍", "👍🏽", "👩‍💻", "👨‍👩‍👧‍👦", "🏳️‍🌈", "❤️", "❤\ufe0f", "🇫🇷", "🇯🇵🇺🇸", "1️⃣", "#️⃣",
		"🧑🏿‍🚀", "\u200d", "\ufe0f", "🫠", "🦀", "⌚", "☃", "\U0001F3FB"}
	diffScripts = []string{"日本語のテキスト", "中文文本，包含标点。", "한국어 텍스트입니다", "ｶﾀｶﾅ", "ｆｕｌｌｗｉｄｔｈ",
		"مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "Привет, мир", "Ελληνικά", "ภาษาไทย", "ქართული", "Հայերեն",
		"አማርኛ", "ᚠᚢᚦ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "𝟘𝟙𝟚", "Ⅻ", "²³", "½", "٣٤٥", "१२३", "〇一二", "㊿", "ǅ", "ﬀ", "İstanbul", "ß", "ẞ"}
	diffOdd = []string{"\x00", "\x01", "\x07", "\x1b[31m", "\x7f", "\u0080", "\u009f", "\ue000", "\uf8ff", "\U000f0000",
		"\U0010fffd", "\ufffd", "\ufffc", "\u00ad", "\u034f", "\u2060", "\u202e", "\u200e", "\ufff9", "\U0001d173",
		"\U000e0041", "\u0378", "\U0001ffff", "\uffff"}
	diffLiterals = []string{"▁", "▁▁", "▁hello", "<0x41>", "<0x0A>", "<0xFF>", "<unk>", "<s>", "</s>", "<pad>",
		"<|im_start|>", "<|im_end|>", "<|im_start", "im_end|>", "<think>", "</think>", "<think", "<tool_call>",
		"<tool_response>", "<start_of_turn>", "<end_of_turn>", "<start_of_image>", "<|eot_id|>", "<|eot_id|",
		"<|begin_of_text|>", "<|start_header_id|>", "<|python_tag|>", "<｜begin▁of▁sentence｜>", "<｜User｜>",
		"<｜tool▁call▁begin｜>", "<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>", "<|constrain|>",
		"<|endoftext|>", "<|fim_prefix|>", "<bos>", "<eos>", "<mask>", "[@BOS@]", "<|reserved_special_token_5|>"}
	diffWords = []string{"the", "The", "THE", "hello", "world", "tokenizer", "don't", "I'm", "we'll", "it's", "naïve",
		"café", "über", "résumé", "Ünïcödé", "camelCaseWord", "snake_case_name", "kebab-case", "HTTPServer", "x", "I",
		"a", "supercalifragilisticexpialidocious", "pneumonoultramicroscopicsilicovolcanoconiosis", "func", "return",
		"null", "true", "1st", "2nd", "v1.2.3", "0x1F", "1e-5", "3.14159", "192.168.0.1", "https://example.com/a?b=c&d=e",
		"user@example.com", "C++", "C#", "Node.js", "git", "#include", "Ünited", "ÅNGSTRÖM"}
	diffCode = []string{
		"func main() {\n\tfmt.Println(\"hi\")\n}\n",
		"def f(x):\n    return x ** 2  # square\n",
		"for (let i = 0; i < n; i++) { a[i] += b[i]; }",
		"SELECT id, name FROM users WHERE age >= 18 ORDER BY name;",
		"<div class=\"a\">\n  <span>text</span>\n</div>",
		"    if err != nil {\n        return fmt.Errorf(\"x: %w\", err)\n    }\n",
		"#!/bin/sh\nset -eu\necho \"$HOME\" | tr -d '\\n'\n",
		"\\begin{equation} e^{i\\pi} + 1 = 0 \\end{equation}",
		"| a | b |\n|---|---|\n| 1 | 2 |\n",
		"x := map[string][]int{\"a\": {1, 2}}\r\n",
	}
)

func (g *textGen) pick(list []string) string { return list[g.rng.IntN(len(list))] }

// digits returns a run of 1–40 digits, ASCII or not.
func (g *textGen) digits() string {
	var b strings.Builder
	n := 1 + g.rng.IntN(40)
	if g.rng.IntN(3) > 0 {
		n = 1 + g.rng.IntN(8)
	}
	zero := []rune{'0', '0', '0', '٠', '०', '０', '𝟎'}[g.rng.IntN(7)]
	for range n {
		b.WriteRune(zero + rune(g.rng.IntN(10)))
	}
	return b.String()
}

// atom returns one randomly chosen building block.
func (g *textGen) atom() string {
	switch k := g.rng.IntN(100); {
	case k < 22:
		return g.pick(g.pieces)
	case k < 34:
		return g.pick(diffWords)
	case k < 46:
		s := g.pick(diffSpaces)
		return strings.Repeat(s, 1+g.rng.IntN(3))
	case k < 52:
		return g.digits()
	case k < 57:
		return g.pick(diffContractions)
	case k < 64:
		return strings.Repeat(g.pick(diffPunct), 1+g.rng.IntN(3))
	case k < 70:
		return g.pick(diffMarks)
	case k < 74:
		return g.pick(diffEmoji)
	case k < 80:
		return g.pick(diffScripts)
	case k < 84:
		return g.pick(diffOdd)
	case k < 89:
		return g.pick(diffLiterals)
	case k < 93:
		return g.pick(g.added)
	case k < 96:
		return g.pick(diffCode)
	default:
		return g.json(2)
	}
}

// json returns a random JSON value, compact or indented.
func (g *textGen) json(depth int) string {
	b := marshal(g.value(depth))
	if g.rng.IntN(3) == 0 {
		var out bytes.Buffer
		_ = json.Indent(&out, b, "", "  ")
		return out.String()
	}
	return string(b)
}

// value returns a random JSON value: objects, arrays, strings of atoms,
// numbers of g.numbers, true, false, null.
func (g *textGen) value(depth int) any {
	switch k := g.rng.IntN(10); {
	case depth > 0 && k < 3:
		obj := map[string]any{}
		for range g.rng.IntN(4) {
			obj[g.key()] = g.value(depth - 1)
		}
		return obj
	case depth > 0 && k < 5:
		var arr []any
		for range g.rng.IntN(4) {
			arr = append(arr, g.value(depth-1))
		}
		return arr
	case k < 7:
		return g.short()
	case k < 9:
		return json.Number(g.pick(g.numbers))
	default:
		return []any{true, false, nil}[g.rng.IntN(3)]
	}
}

// key returns an object key: an identifier, a piece, or odd text.
func (g *textGen) key() string {
	var k string
	switch g.rng.IntN(4) {
	case 0:
		k = g.pick(diffWords)
	case 1:
		k = g.short()
	default:
		k = g.pick([]string{"id", "name", "path", "query", "city", "count", "items", "type", "value", "x_y", "€", "ключ", "キー", ""})
	}
	// A JavaScript object lists keys that are array indices ("947") first,
	// so the reference would print them out of place; Python and contextd
	// keep the order they came in.
	if n, err := strconv.ParseUint(k, 10, 32); err == nil && n < 1<<32-1 && strconv.FormatUint(n, 10) == k {
		k = "k" + k
	}
	return k
}

// short returns a few atoms (no long runs).
func (g *textGen) short() string {
	var b strings.Builder
	for range 1 + g.rng.IntN(4) {
		b.WriteString(g.atom())
	}
	return b.String()
}

// longRun returns a run of more than 10,000 characters without a space.
func (g *textGen) longRun() string {
	unit := g.pick([]string{"a", "ab", "A", "x1", "0", "9", "本", "ा", "e\u0301", "😀", "👍🏽", ".", "-", "_", "=", "/",
		"\u00a0", "\u3000", "\ufeff", "\n", "\t", "é", "αβγ", "'s", "<0x41>", "<think>", "▁"})
	var b strings.Builder
	for b.Len() < 10_000*len(unit)/utf8.RuneCountInString(unit) {
		b.WriteString(unit)
		if g.rng.IntN(200) == 0 {
			b.WriteString(g.pick(g.pieces))
		}
	}
	return b.String()
}

// text returns the i-th text: most are 1–30 atoms; every 1000th a long run.
func (g *textGen) text(i int) string {
	if i%1000 == 999 {
		return g.short() + g.longRun() + g.short()
	}
	var b strings.Builder
	for range 1 + g.rng.IntN(30) {
		b.WriteString(g.atom())
	}
	return b.String()
}

// marshal writes v as compact JSON without escaping <, > and & (as clients
// send it).
func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
