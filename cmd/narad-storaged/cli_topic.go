package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/narad-io/storage/client"
)

// topicCommands are topic's subcommands: completion and usage read them.
var topicCommands = []command{
	{"create", "create a topic: --partitions, retention by age and size", runTopicCreate},
	{"list", "list every topic", runTopicList},
	{"describe", "describe a topic and its partitions", runTopicDescribe},
	{"alter", "change a topic's retention or automatic dictionary", runTopicAlter},
	{"delete", "delete a topic and its records", runTopicDelete},
	{"train-dictionary", "train a zstd dictionary on a topic's newest records; new frames use it", runTopicTrainDictionary},
	{"dictionaries", "list a topic's zstd dictionaries on the node", runTopicDictionaries},
}

// runTopic runs a topic subcommand: create, list, describe, alter or
// delete, each through the client's topic calls. An error answer is
// printed with its code and message (exit 1); a usage error exits 2.
func runTopic(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		w := stderr
		if len(args) > 0 {
			w = stdout
		}
		fmt.Fprint(w, topicUsage())
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range topicCommands {
		if c.name == args[0] {
			return c.run(args[1:], stdin, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "topic: unknown subcommand %q\n\n%s", args[0], topicUsage())
	return 2
}

// topicUsage lists the subcommands and every flag they take, from the
// subcommands themselves.
func topicUsage() string {
	var b strings.Builder
	b.WriteString("usage: narad-storaged topic create|list|describe|alter|delete|train-dictionary|dictionaries [flags]\n\n")
	for _, c := range topicCommands {
		fmt.Fprintf(&b, "  %-16s %s\n", c.name, c.summary)
	}
	b.WriteString("\nflags (each subcommand takes those its -h lists):\n")
	seen := map[string]bool{}
	for _, c := range topicCommands {
		fs, _ := newTopicFlags(c.name, io.Discard)
		fs.VisitAll(func(f *flag.Flag) {
			if seen[f.Name] {
				return
			}
			seen[f.Name] = true
			one := flag.NewFlagSet("", flag.ContinueOnError)
			one.SetOutput(&b)
			one.Var(f.Value, f.Name, f.Usage)
			one.PrintDefaults()
		})
	}
	b.WriteString("\nExit status: 0 done, 1 the daemon refused (its error code and message on stderr)\nor could not be reached, 2 usage.\n")
	return b.String()
}

// topicFlags are a topic subcommand's flags.
type topicFlags struct {
	cf                      clientFlags
	asJSON                  bool
	partitions              int
	retentionMs, retentionB string
	samples, maxDictBytes   int
	dictionaryAfter         int64
}

// newTopicFlags defines the flags subcommand name takes; the connection
// flags are the other client commands' own (--addr, --auth-token-file,
// --tls-ca), and --topic where it names one.
func newTopicFlags(name string, stderr io.Writer) (*flag.FlagSet, *topicFlags) {
	var tf topicFlags
	fs := flag.NewFlagSet("topic "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	common := flag.NewFlagSet("", flag.ContinueOnError)
	tf.cf.register(common)
	take := []string{"addr", "auth-token-file", "tls-ca"}
	if name != "list" {
		take = append(take, "topic")
	}
	for _, n := range take {
		f := common.Lookup(n)
		fs.Var(f.Value, f.Name, f.Usage)
	}
	if name != "delete" {
		fs.BoolVar(&tf.asJSON, "json", false, "print the daemon's JSON answer instead of text")
	}
	if name == "create" {
		fs.IntVar(&tf.partitions, "partitions", 0, "partitions of the topic, 1 to 100,000 (required)")
	}
	if name == "create" || name == "alter" {
		fs.StringVar(&tf.retentionMs, "retention-ms", "", "keep records this long: milliseconds, or a duration such as 7d, 36h, 1h30m; 0 is no age bound")
		fs.StringVar(&tf.retentionB, "retention-bytes", "", "keep at most this much per partition before the oldest sealed segments go: bytes, or 10GiB, 500MB; 0 is no size bound")
	}
	if name == "alter" {
		fs.Int64Var(&tf.dictionaryAfter, "dictionary-after", 0, "train the topic a zstd dictionary by itself once this many records were produced on a node that holds none (0: never)")
	}
	if name == "train-dictionary" {
		fs.IntVar(&tf.samples, "samples", 0, "train on this many of the topic's newest records on the node, 8 to 100,000 (0: 2,000)")
		fs.IntVar(&tf.maxDictBytes, "max-bytes", 0, "bound the dictionary to this many bytes, 1,024 to 1,048,576 (0: 65,536)")
	}
	return fs, &tf
}

// parseTopicCommand parses a subcommand's flags; done is true when it
// should exit with code.
func parseTopicCommand(name string, args []string, stderr io.Writer, usageLine string) (tf *topicFlags, set map[string]bool, code int, done bool) {
	fs, tf := newTopicFlags(name, stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: narad-storaged topic "+usageLine+"\n\n")
		fs.PrintDefaults()
	}
	if code, done := parseClientCommand(fs, args, stderr); done {
		return nil, nil, code, true
	}
	set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if name != "list" && tf.cf.topic == "" {
		fmt.Fprintf(stderr, "topic %s: --topic is required\n", name)
		return nil, nil, 2, true
	}
	return tf, set, 0, false
}

// retention reads the retention flags given: nil for one not given.
func (tf *topicFlags) retention(set map[string]bool) (ms, bytes *int64, err error) {
	if set["retention-ms"] {
		v, err := parseMillis(tf.retentionMs)
		if err != nil {
			return nil, nil, fmt.Errorf("--retention-ms %w", err)
		}
		ms = &v
	}
	if set["retention-bytes"] {
		v, err := parseBytes(tf.retentionB)
		if err != nil {
			return nil, nil, fmt.Errorf("--retention-bytes %w", err)
		}
		bytes = &v
	}
	return ms, bytes, nil
}

// topicCall runs call with the client the flags describe, bounded in
// time; an error is printed as the daemon gave it (code and message),
// exit 1.
func topicCall(name string, tf *topicFlags, stderr io.Writer, call func(context.Context, *client.Client) error) int {
	c, err := tf.cf.anyClient()
	if err != nil {
		fmt.Fprintf(stderr, "topic %s: %v\n", name, err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := call(ctx, c); err != nil {
		fmt.Fprintf(stderr, "topic %s: %v\n", name, err)
		return 1
	}
	return 0
}

func runTopicCreate(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	tf, set, code, done := parseTopicCommand("create", args, stderr, "create --topic T --partitions N [--retention-ms D] [--retention-bytes B] [--json]")
	if done {
		return code
	}
	if !set["partitions"] {
		fmt.Fprintln(stderr, "topic create: --partitions is required")
		return 2
	}
	ms, bytes, err := tf.retention(set)
	if err != nil {
		fmt.Fprintln(stderr, "topic create:", err)
		return 2
	}
	var r client.Retention
	if ms != nil {
		r.Ms = *ms
	}
	if bytes != nil {
		r.Bytes = *bytes
	}
	return topicCall("create", tf, stderr, func(ctx context.Context, c *client.Client) error {
		t, created, err := c.CreateTopic(ctx, tf.cf.topic, tf.partitions, r)
		if err != nil {
			return err
		}
		if tf.asJSON {
			return printJSONDoc(stdout, t)
		}
		what := "created:"
		if !created {
			what = "exists as asked:"
		}
		fmt.Fprintf(stdout, "topic %s %s %d partitions, retention %s, %s\n", t.Name, what, len(t.Partitions), formatMillis(t.RetentionMs), formatBytes(t.RetentionBytes))
		return nil
	})
}

func runTopicList(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	tf, _, code, done := parseTopicCommand("list", args, stderr, "list [--json]")
	if done {
		return code
	}
	return topicCall("list", tf, stderr, func(ctx context.Context, c *client.Client) error {
		topics, err := c.Topics(ctx)
		if err != nil {
			return err
		}
		if tf.asJSON {
			if topics == nil {
				topics = []client.Topic{}
			}
			return printJSONDoc(stdout, struct {
				Topics []client.Topic `json:"topics"`
			}{topics})
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TOPIC\tPARTITIONS\tRETENTION-MS\tRETENTION-BYTES")
		for _, t := range topics {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\n", t.Name, len(t.Partitions), t.RetentionMs, t.RetentionBytes)
		}
		return tw.Flush()
	})
}

func runTopicDescribe(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	tf, _, code, done := parseTopicCommand("describe", args, stderr, "describe --topic T [--json]")
	if done {
		return code
	}
	return topicCall("describe", tf, stderr, func(ctx context.Context, c *client.Client) error {
		t, err := c.Topic(ctx, tf.cf.topic)
		if err != nil {
			return err
		}
		if tf.asJSON {
			return printJSONDoc(stdout, t)
		}
		return printDescription(stdout, t)
	})
}

func runTopicAlter(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	tf, set, code, done := parseTopicCommand("alter", args, stderr, "alter --topic T [--retention-ms D] [--retention-bytes B] [--dictionary-after N] [--json]")
	if done {
		return code
	}
	ms, bytes, err := tf.retention(set)
	if err != nil {
		fmt.Fprintln(stderr, "topic alter:", err)
		return 2
	}
	if ms == nil && bytes == nil && !set["dictionary-after"] {
		fmt.Fprintln(stderr, "topic alter: give --retention-ms, --retention-bytes, --dictionary-after or several (a topic's partitions cannot change)")
		return 2
	}
	return topicCall("alter", tf, stderr, func(ctx context.Context, c *client.Client) error {
		var t client.Topic
		var err error
		if set["dictionary-after"] {
			if t, err = c.SetDictionaryAfter(ctx, tf.cf.topic, tf.dictionaryAfter); err != nil {
				return err
			}
		}
		if ms != nil || bytes != nil {
			if t, err = c.UpdateRetention(ctx, tf.cf.topic, client.RetentionChange{Ms: ms, Bytes: bytes}); err != nil {
				return err
			}
		}
		if tf.asJSON {
			return printJSONDoc(stdout, t)
		}
		dictionary := ""
		if t.DictionaryAfter > 0 {
			dictionary = fmt.Sprintf("; a dictionary after %d records", t.DictionaryAfter)
		}
		fmt.Fprintf(stdout, "topic %s: retention %s, %s%s\n", t.Name, formatMillis(t.RetentionMs), formatBytes(t.RetentionBytes), dictionary)
		return nil
	})
}

func runTopicDelete(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	tf, _, code, done := parseTopicCommand("delete", args, stderr, "delete --topic T")
	if done {
		return code
	}
	return topicCall("delete", tf, stderr, func(ctx context.Context, c *client.Client) error {
		if err := c.DeleteTopic(ctx, tf.cf.topic); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "topic %s deleted\n", tf.cf.topic)
		return nil
	})
}

// printDescription prints a topic's description as text: the topic, then
// a table of its partitions (with their owners on a cluster's node).
func printDescription(w io.Writer, t client.Topic) error {
	fmt.Fprintf(w, "topic %s, incarnation %s, %d partitions\nretention %s, %s\n\n", t.Name, t.Incarnation, len(t.Partitions), formatMillis(t.RetentionMs), formatBytes(t.RetentionBytes))
	owners := false
	for _, p := range t.Partitions {
		owners = owners || p.Owner != nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "PARTITION\tSTART\tHIGH-WATERMARK\tSEGMENTS\tBYTES"
	if owners {
		head += "\tOWNER"
	}
	fmt.Fprintln(tw, head)
	for _, p := range t.Partitions {
		line := fmt.Sprintf("%d\t%d\t%d\t%d\t%d", p.Partition, p.StartOffset, p.HighWatermark, p.Segments, p.Bytes)
		if p.Remote {
			line = fmt.Sprintf("%d\t-\t-\t-\t-", p.Partition) // its owner describes it
		}
		if owners {
			switch {
			case p.Owner == nil:
				line += "\t(none yet)"
			default:
				line += "\t" + p.Owner.NodeID + " " + p.Owner.Addr
			}
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}

// printJSONDoc prints v as one JSON document on one line.
func printJSONDoc(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

func runTopicTrainDictionary(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	tf, _, code, done := parseTopicCommand("train-dictionary", args, stderr, "train-dictionary --topic T [--samples N] [--max-bytes B] [--json]")
	if done {
		return code
	}
	return topicCall("train-dictionary", tf, stderr, func(ctx context.Context, c *client.Client) error {
		d, err := c.TrainDictionary(ctx, tf.cf.topic, client.DictionaryTraining{Samples: tf.samples, MaxBytes: tf.maxDictBytes})
		if err != nil {
			return err
		}
		if tf.asJSON {
			return printJSONDoc(stdout, d)
		}
		fmt.Fprintf(stdout, "topic %s: dictionary %d, %d bytes, trained on %d records; new frames use it\n", tf.cf.topic, d.ID, d.Bytes, d.Samples)
		return nil
	})
}

func runTopicDictionaries(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	tf, _, code, done := parseTopicCommand("dictionaries", args, stderr, "dictionaries --topic T [--json]")
	if done {
		return code
	}
	return topicCall("dictionaries", tf, stderr, func(ctx context.Context, c *client.Client) error {
		dicts, err := c.Dictionaries(ctx, tf.cf.topic)
		if err != nil {
			return err
		}
		if tf.asJSON {
			if dicts == nil {
				dicts = []client.Dictionary{}
			}
			return printJSONDoc(stdout, struct {
				Dictionaries []client.Dictionary `json:"dictionaries"`
			}{dicts})
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tBYTES\tTRAINED\tCURRENT")
		for _, d := range dicts {
			fmt.Fprintf(tw, "%d\t%d\t%s\t%v\n", d.ID, d.Bytes, time.UnixMilli(d.TrainedAtMs).UTC().Format(time.RFC3339), d.Current)
		}
		return tw.Flush()
	})
}
