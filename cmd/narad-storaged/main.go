// Command narad-storaged serves one node's partitions over HTTP (the
// contract is docs/http-api.md), alone or as a node of a cluster on etcd
// (docs/scaling.md), and carries the operator commands verify (an fsck of
// a data directory), inspect (a dump of one segment) and diskcheck (a
// probe of a data directory's file system); produce and consume, clients
// for a terminal; topic, to manage topics; move, a cluster's moves,
// drains and lost nodes; version and completion.
package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"regexp"
	goruntime "runtime"
	"runtime/debug"
	"strings"
)

// version is the module's version; a release build may set it with
// -ldflags "-X main.version=v1.2.3", else the build info's is used.
var version = ""

func main() {
	if len(os.Args) > 1 {
		collectorFor(os.Args[1])
	}
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// command is one subcommand of narad-storaged.
type command struct {
	name, summary string
	run           func(args []string, stdin io.Reader, stdout, stderr io.Writer) int
}

// commands are set in init: completion and usage read them.
var commands []command

func init() {
	commands = []command{
		{"serve", "serve the node over HTTP (the default command)", func(a []string, _ io.Reader, _, e io.Writer) int { return runServe(a, e) }},
		{"verify", "check every frame of a data directory, without a daemon", func(a []string, _ io.Reader, o, e io.Writer) int { return runVerify(a, o, e) }},
		{"inspect", "dump one segment file's frames and records", func(a []string, _ io.Reader, o, e io.Writer) int { return runInspect(a, o, e) }},
		{"diskcheck", "probe a data directory's file system: flushes, type, space, descriptors", func(a []string, _ io.Reader, o, e io.Writer) int { return runDiskCheck(a, o, e) }},
		{"produce", "send stdin's lines as records over a topic's partitions, batched", runProduce},
		{"consume", "print records from an offset on, or follow them", func(a []string, _ io.Reader, o, e io.Writer) int { return runConsume(a, o, e) }},
		{"topic", "create, list, describe, alter or delete topics", runTopic},
		{"move", "move a partition to another node of a cluster; list or cancel moves", func(a []string, _ io.Reader, o, e io.Writer) int { return runMove(a, o, e) }},
		{"version", "print the version, VCS revision and its commit time", func(_ []string, _ io.Reader, o, _ io.Writer) int { fmt.Fprintln(o, versionLine()); return 0 }},
		{"completion", "print a shell completion script: completion bash|zsh", runCompletion},
	}
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	name := "serve"
	if len(args) > 0 {
		switch args[0] {
		case "help", "-h", "-help", "--help":
			fmt.Fprint(stdout, usage())
			return 0
		case "--version", "-version":
			fmt.Fprintln(stdout, versionLine())
			return 0
		}
		if !strings.HasPrefix(args[0], "-") {
			name, args = args[0], args[1:]
		}
	}
	for _, c := range commands {
		if c.name == name {
			return c.run(args, stdin, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "narad-storaged: unknown command %q\n\n%s", name, usage())
	return 2
}

// usage lists every command with its flags, taken from the commands
// themselves so it never drifts.
func usage() string {
	var b strings.Builder
	b.WriteString("usage: narad-storaged [command] [flags]\n\ncommands:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-11s %s\n", c.name, c.summary)
	}
	for _, c := range commands {
		flags := commandFlags(c)
		if len(flags) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n%s flags:", c.name)
		for i, f := range flags {
			if i%6 == 0 {
				b.WriteString("\n   ")
			}
			b.WriteString(" --" + f)
		}
		b.WriteString("\n")
	}
	b.WriteString("\nrun \"narad-storaged COMMAND -h\" for a command's flags in full.\n")
	return b.String()
}

var flagLine = regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`)

// commandFlags lists a command's flag names, from its own -h.
func commandFlags(c command) []string {
	if c.name == "version" || c.name == "completion" {
		return nil
	}
	var out bytes.Buffer
	c.run([]string{"-h"}, strings.NewReader(""), &out, &out)
	var names []string
	for _, m := range flagLine.FindAllStringSubmatch(out.String(), -1) {
		names = append(names, m[1])
	}
	return names
}

// versionLine is the module version, the VCS revision and the time of
// its commit, from the build info (a -ldflags version wins). The build
// info holds no build time; the commit's time dates the source.
func versionLine() string {
	v, rev, at, dirty := version, "unknown", "", ""
	if info, ok := debug.ReadBuildInfo(); ok {
		if v == "" {
			v = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = ", committed " + s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = ", with uncommitted changes"
				}
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	return fmt.Sprintf("narad-storaged %s (revision %s%s%s, %s)", v, rev, at, dirty, goruntime.Version())
}
