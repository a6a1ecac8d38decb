// Command costbench replays the transcripts of testdata/corpus/dev through
// PrepareContext at 16k and 32k windows (-windows for others) and prints, per compaction strategy,
// input tokens, prefix-cache hit rate, billed units under Anthropic and
// OpenAI cache pricing, fact retention and invalid views (`make bench-cost`).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/contextd/contextd/internal/costbench"
)

func main() {
	corpus := flag.String("corpus", "testdata/corpus/dev", "directory of .jsonl transcripts")
	windowList := flag.String("windows", "16384,32768", "comma-separated context windows, in tokens")
	flag.Parse()
	var windows []int64
	for _, w := range strings.Split(*windowList, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(w), 10, 64)
		if err != nil || n < 1024 {
			fmt.Fprintf(os.Stderr, "costbench: -windows: %q is not a window of 1024 tokens or more\n", w)
			os.Exit(2)
		}
		windows = append(windows, n)
	}
	files, err := filepath.Glob(filepath.Join(*corpus, "*.jsonl"))
	if err == nil && len(files) == 0 {
		err = fmt.Errorf("no transcripts in %s", *corpus)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "costbench:", err)
		os.Exit(1)
	}
	results, err := costbench.Run(context.Background(), files, windows, costbench.Strategies(), os.TempDir())
	if err != nil {
		fmt.Fprintln(os.Stderr, "costbench:", err)
		os.Exit(1)
	}
	fmt.Printf("%d transcripts of %s; previous request fully cached, the next hits the common prefix\n\n", len(files), *corpus)
	costbench.Print(os.Stdout, results)
}
