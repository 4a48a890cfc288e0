package main

// The offline tools' commands, verify and inspect: flag parsing and exit
// statuses around package tool, which does the reading and the output.

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/narad-io/storage/tool"
)

// inspectMaxBytesDefault is how many bytes of a key or a value inspect
// shows by default.
const inspectMaxBytesDefault = 200

// runVerify implements `narad-storaged verify --data-dir DIR [--json]`; it
// returns the process exit code: 0 when everything is clean, 1 when
// anything is damaged (or could not be read), 2 on a usage error or a data
// directory that cannot be read.
func runVerify(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("verify", flag.ContinueOnError)
	flags.SetOutput(stderr)
	dataDir := flags.String("data-dir", "./narad-data", "the data directory to check")
	asJSON := flags.Bool("json", false, "print one JSON document instead of text")
	flags.Usage = func() {
		fmt.Fprint(stderr, "usage: narad-storaged verify [--data-dir DIR] [--json]\n\n"+
			"Checks every frame (CRC, position, records) of every segment of every partition\n"+
			"under DIR/topics/, without a running daemon, and writes nothing. Copies set\n"+
			"aside under DIR/lost/ are listed, not checked.\n"+
			"Exit status: 0 clean, 1 damage found, 2 usage error or unreadable data directory.\n\n")
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if flags.NArg() > 0 {
		fmt.Fprintf(stderr, "verify: unexpected argument %q (the data directory goes in --data-dir)\n", flags.Arg(0))
		flags.Usage()
		return 2
	}
	if *dataDir == "" {
		fmt.Fprintln(stderr, "verify: --data-dir is empty")
		return 2
	}
	clean, err := tool.Verify(stdout, tool.VerifyOptions{DataDir: *dataDir, JSON: *asJSON, Messages: stderr})
	if err != nil {
		fmt.Fprintf(stderr, "verify: %v\n", err)
		return 2
	}
	if !clean {
		return 1
	}
	return 0
}

// runInspect implements `narad-storaged inspect [--records] [--json]
// [--max-bytes N] SEGMENT.log`; it returns the process exit code: 0 when
// every frame checks out, 1 when the file holds damage, 2 on a usage
// error or a file that cannot be read.
func runInspect(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("inspect", flag.ContinueOnError)
	flags.SetOutput(stderr)
	withRecords := flags.Bool("records", false, "print every record too")
	asJSON := flags.Bool("json", false, "print one JSON object per frame (JSON lines)")
	maxBytes := flags.Int("max-bytes", inspectMaxBytesDefault, "bytes of a key or value to show; 0 shows all")
	flags.Usage = func() {
		fmt.Fprint(stderr, "usage: narad-storaged inspect [--records] [--json] [--max-bytes N] SEGMENT.log\n\n"+
			"Dumps the frame headers of one segment file (and with --records its records),\n"+
			"with every problem found: damaged or misplaced frames, gaps, a torn tail.\n"+
			"Exit status: 0 clean, 1 damage found, 2 usage error or unreadable file.\n\n")
		flags.PrintDefaults()
	}
	positional, err := parseInterleaved(flags, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if len(positional) != 1 {
		fmt.Fprintf(stderr, "inspect: want exactly one segment file, got %d arguments\n", len(positional))
		flags.Usage()
		return 2
	}
	if *maxBytes < 0 {
		fmt.Fprintf(stderr, "inspect: --max-bytes %d is negative\n", *maxBytes)
		return 2
	}
	problems, err := tool.Inspect(stdout, tool.InspectOptions{Segment: positional[0], Records: *withRecords, JSON: *asJSON, MaxBytes: *maxBytes, Messages: stderr})
	if err != nil {
		fmt.Fprintf(stderr, "inspect: %v\n", err)
		return 2
	}
	if problems > 0 {
		return 1
	}
	return 0
}

// parseInterleaved parses flags that may come before or after the
// positional arguments (`inspect SEGMENT.log --records`), and returns the
// positional ones. Everything after "--" is positional.
func parseInterleaved(flags *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := flags.Parse(args); err != nil {
			return nil, err
		}
		rest := flags.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(positional, rest...), nil
		}
		if len(rest) == 0 {
			return positional, nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}
