// Command contextctl shows contextd's context bar in a terminal and drives
// compaction, revert, expand and hand-off. Run `contextctl --help`.
package main

import (
	"os"

	"github.com/contextd/contextd/internal/contextctl"
)

func main() { os.Exit(contextctl.Main(os.Args[1:], os.Stdout, os.Stderr)) }
