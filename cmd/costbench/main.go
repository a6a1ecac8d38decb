// Command costbench replays the transcripts of testdata/corpus/dev through
// PrepareContext at 16k and 32k windows and prints, per compaction strategy,
// input tokens, prefix-cache hit rate, billed units under Anthropic and
// OpenAI cache pricing, fact retention and invalid views (`make bench-cost`).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/contextd/contextd/internal/costbench"
)

func main() {
	corpus := flag.String("corpus", "testdata/corpus/dev", "directory of .jsonl transcripts")
	flag.Parse()
	files, err := filepath.Glob(filepath.Join(*corpus, "*.jsonl"))
	if err == nil && len(files) == 0 {
		err = fmt.Errorf("no transcripts in %s", *corpus)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "costbench:", err)
		os.Exit(1)
	}
	results, err := costbench.Run(context.Background(), files, []int64{16_384, 32_768}, costbench.Strategies(), os.TempDir())
	if err != nil {
		fmt.Fprintln(os.Stderr, "costbench:", err)
		os.Exit(1)
	}
	fmt.Printf("%d transcripts of %s; previous request fully cached, the next hits the common prefix\n\n", len(files), *corpus)
	costbench.Print(os.Stdout, results)
}
