// Command narad-storaged serves one node's partitions over HTTP (the
// contract is docs/http-api.md), and carries the operator commands verify
// (an fsck of a data directory) and inspect (a dump of one segment), and
// produce and consume, small clients for a terminal.
package main

import (
	"fmt"
	"io"
	"os"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return runServe(args, stderr)
	case "verify":
		return runVerify(args, stdout, stderr)
	case "inspect":
		return runInspect(args, stdout, stderr)
	case "produce":
		return runProduce(args, stdin, stdout, stderr)
	case "consume":
		return runConsume(args, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "narad-storaged", version)
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "narad-storaged: unknown command %q\n%s", cmd, usage)
	return 2
}

const usage = `usage: narad-storaged [command] [flags]

commands:
  serve      serve the node over HTTP (the default)
  verify     --data-dir DIR: check every frame of every segment; exit 1 on damage
  inspect    [--records] [--json] SEGMENT.log: dump a segment's frames
  produce    --topic T [--partition P] [--addr URL]: lines from stdin as records
  consume    --topic T [--partition P] [--from N] [--follow] [--addr URL]
  version    print the version

run "narad-storaged COMMAND -h" for a command's flags.
`
