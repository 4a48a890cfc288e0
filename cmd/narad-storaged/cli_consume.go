package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/narad-io/storage/api"
	"github.com/narad-io/storage/client"
)

// runConsume prints the records of a topic, every partition unless
// --partition pins one, through a client.Consumer: from --from on, or
// where a fan-out cursor stands (--cursor, committed past what is
// printed); with --follow it waits for new ones as they commit. A damaged
// frame stops it (exit 1, naming the partition and offsets), or with
// --skip-damaged is stepped over with a warning on stderr; records
// retention deleted are skipped to the start, with a warning. With
// --queue it is a queue consumer instead: of the whole topic across its
// owners (runQueueTopic), of one partition (runQueueConsume), or a peek
// (--no-ack, runQueueConsume).
func runConsume(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("consume", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs)
	fs.Lookup("partition").Usage = "pin one partition (default: every partition)"
	from := fs.String("from", "earliest", "where each partition starts: earliest, latest, an offset (of every partition read; one holding fewer records starts at its end), PARTITION:OFFSET,... (one for each partition read), or a time (RFC 3339: the first record committed at or after it); with --cursor, where a new cursor starts: earliest or latest")
	cursorName := fs.String("cursor", "", "read through the fan-out cursor NAME: resume where it stands on each partition (made at --from if the topic has none), and move it past what is printed")
	follow := fs.Bool("follow", false, "keep waiting for new records, on every partition read")
	asJSON := fs.Bool("json", false, `print JSON lines: {"partition","offset","key","value","committed_at_ms"}, key and value base64 with "encoding":"base64" when not UTF-8`)
	format := fs.String("format", "", "print each record as FMT (default '"+defaultFormat+"'): "+formatVerbs)
	skipDamaged := fs.Bool("skip-damaged", false, "step over the records of a damaged frame (saying so on stderr) instead of stopping there")
	queue := fs.Bool("queue", false, "be a queue consumer: lease records of every partition on every node that owns some (of --partition's owner alone with it), print them, ack them; without --follow, until the last consume answered by every owner leased nothing")
	noAck := fs.Bool("no-ack", false, "with --queue: a peek: print one consume's records of the node asked (or of --partition) and give them back (nack)")
	lease := fs.Duration("lease", 30*time.Second, "with --queue: how long a record stays leased")
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: narad-storaged consume --topic T [--partition P] [--from WHERE] [--follow] [--json | --format FMT]\n"+
			"       narad-storaged consume --cursor NAME --topic T [--partition P] [--from earliest|latest] [--follow] [--json | --format FMT]\n"+
			"       narad-storaged consume --queue --topic T [--partition P] [--follow] [--no-ack] [--lease D] [--json | --format FMT]\n\n"+
			"Prints the records of every partition of the topic (of one with --partition), each\n"+
			"partition in offset order: PARTITION<TAB>OFFSET<TAB>KEY<TAB>VALUE per line (bytes as\n"+
			"stored), JSON lines, or --format's. Exit status: 0 done, 1 a read failed (or met a\n"+
			"damaged frame without --skip-damaged), 2 usage.\n\n")
		fs.PrintDefaults()
	}
	if code, done := parseClientCommand(fs, args, stderr); done {
		return code
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if code := checkConsumeFlags(set, *queue, *cursorName, *from, *noAck, *follow, *lease, stderr); code >= 0 {
		return code
	}
	printer := &recordPrinter{topic: cf.topic, asJSON: *asJSON}
	if !*asJSON {
		spec := *format
		if !set["format"] {
			spec = defaultFormat
		}
		var err error
		if printer.format, err = parseFormat(spec); err != nil {
			fmt.Fprintln(stderr, "consume: --format", err)
			return 2
		}
	}
	var start client.Start
	if !*queue {
		var err error
		if start, err = parseFrom(*from, set["partition"], cf.partition); err != nil {
			fmt.Fprintln(stderr, "consume: --from", err)
			return 2
		}
	}
	c, err := cf.client()
	if err != nil {
		fmt.Fprintln(stderr, "consume:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	out := bufio.NewWriterSize(stdout, 64<<10)
	if *queue && !set["partition"] && !*noAck {
		return runQueueTopic(ctx, c, cf.topic, *lease, *follow, printer, out, stderr)
	}
	if *queue {
		opts := client.ConsumeOptions{OnlyPartition: set["partition"], Partition: cf.partition, MaxRecords: 1000, Lease: *lease}
		return runQueueConsume(ctx, c, cf.topic, opts, *follow, *noAck, printer, out, stderr)
	}
	opts := client.ConsumerOptions{Start: start, Cursor: *cursorName, Follow: *follow, SkipDamaged: *skipDamaged}
	if set["partition"] {
		opts.Partitions = []int{cf.partition}
	}
	k, err := c.NewConsumer(ctx, cf.topic, opts)
	if err != nil {
		if ctx.Err() != nil {
			return 0
		}
		fmt.Fprintln(stderr, "consume:", err)
		return 1
	}
	defer k.Close()
	return readTopic(ctx, k, *cursorName != "", printer, out, stderr)
}

// consumeHeapLimit is the consume command's soft memory limit (cliGC):
// above its 16 answers in flight, each at most its 1 MiB of max_bytes
// or a first record of up to 64 MiB that goes alone, and what it prints
// of one.
const consumeHeapLimit = 16*64<<20 + 256<<20

// checkConsumeFlags refuses flags that do not go together: -1 when they
// do, else the exit status (2).
func checkConsumeFlags(set map[string]bool, queue bool, cursorName, from string, noAck, follow bool, lease time.Duration, stderr io.Writer) int {
	var problem string
	switch {
	case !queue && (set["no-ack"] || set["lease"]):
		problem = "--no-ack and --lease are for --queue"
	case queue && set["from"]:
		problem = "--from is not for --queue: a queue consumer leases what nobody acked"
	case (queue || cursorName != "") && set["skip-damaged"]:
		problem = "a queue consumer or a cursor always steps over damaged records (the node settles them); --skip-damaged is for a replay"
	case queue && cursorName != "":
		problem = "--queue and --cursor are two kinds of reader; give one"
	case cursorName != "" && from != "earliest" && from != "latest":
		problem = "with --cursor, --from is where a new cursor starts: earliest or latest"
	case noAck && follow:
		problem = "--no-ack is a one-time peek; it does not go with --follow"
	case queue && lease < time.Millisecond:
		problem = "--lease must be at least 1ms"
	case set["json"] && set["format"]:
		problem = "--json and --format are two ways to print; give one"
	default:
		return -1
	}
	fmt.Fprintln(stderr, "consume:", problem)
	return 2
}

var offsetList = regexp.MustCompile(`^[0-9]+:[0-9]+(,[0-9]+:[0-9]+)*$`)

// parseFrom reads --from: earliest, latest, an offset, PARTITION:OFFSET
// pairs, or an RFC 3339 time. Pairs name every partition read: with
// --partition, that one alone. An offset with --partition is that
// partition's own (an error past its end, as a pair's is); without, it
// is every partition's, a shorter one read from its end.
func parseFrom(from string, pinned bool, partition int) (client.Start, error) {
	switch from {
	case "earliest":
		return client.StartEarliest(), nil
	case "latest":
		return client.StartLatest(), nil
	}
	if offsetList.MatchString(from) {
		offsets := map[int]int64{}
		for _, pair := range strings.Split(from, ",") {
			ps, offs, _ := strings.Cut(pair, ":")
			p, perr := strconv.Atoi(ps)
			o, oerr := strconv.ParseInt(offs, 10, 64)
			if perr != nil || oerr != nil {
				return client.Start{}, fmt.Errorf("%q: %q is out of range", from, pair)
			}
			if _, twice := offsets[p]; twice {
				return client.Start{}, fmt.Errorf("%q names partition %d twice", from, p)
			}
			offsets[p] = o
		}
		if _, ok := offsets[partition]; pinned && (!ok || len(offsets) != 1) {
			return client.Start{}, fmt.Errorf("%q: with --partition %d, name that partition alone (or give its offset: --from N)", from, partition)
		}
		return client.StartAtOffsets(offsets), nil
	}
	if at, err := time.Parse(time.RFC3339Nano, from); err == nil {
		return client.StartAtTime(at), nil
	}
	offset, err := strconv.ParseInt(from, 10, 64)
	if err != nil || offset < 0 {
		return client.Start{}, fmt.Errorf("%q: want earliest, latest, an offset from 0 up, PARTITION:OFFSET,... or an RFC 3339 time", from)
	}
	if pinned {
		return client.StartAtOffsets(map[int]int64{partition: offset}), nil
	}
	return client.StartAtOffset(offset), nil
}

// readTopic prints what k's Polls return, each batch written out before
// the next Poll, until k has read everything (without --follow) or an
// interrupt. Through a cursor each batch is committed once printed, so a
// consume killed between print and commit prints those records again,
// never loses them.
func readTopic(ctx context.Context, k *client.Consumer, cursor bool, printer *recordPrinter, out *bufio.Writer, stderr io.Writer) int {
	for {
		b, err := k.Poll(ctx)
		var pe *client.PartitionError
		var e *client.Error
		switch {
		case errors.Is(err, io.EOF) || (err != nil && ctx.Err() != nil):
			return 0
		case errors.As(err, &pe) && errors.As(err, &e) && e.Code == api.CodeRecordUnreadable && e.NextOffset != nil:
			fmt.Fprintf(stderr, "consume: partition %d: offsets %d..%d are in a damaged frame; --skip-damaged (or --partition %d --from %d) steps over them\n",
				pe.Partition, pe.Offset, *e.NextOffset-1, pe.Partition, *e.NextOffset)
			return 1
		case err != nil:
			fmt.Fprintln(stderr, "consume:", err)
			return 1
		}
		if g := b.Gap; g != nil {
			what := "are in a damaged frame"
			if g.Deleted {
				what = "were deleted by retention"
			}
			fmt.Fprintf(stderr, "consume: partition %d: offsets %d..%d %s; skipped\n", b.Partition, g.From, g.To-1, what)
		}
		for _, r := range b.Records {
			printer.append(b.Partition, r)
		}
		_, err = out.Write(printer.buf)
		printer.buf = printer.buf[:0]
		if err == nil {
			err = out.Flush()
		}
		if err != nil {
			fmt.Fprintln(stderr, "consume:", err)
			return 1
		}
		if cursor {
			if err := k.Commit(context.WithoutCancel(ctx)); err != nil {
				fmt.Fprintln(stderr, "consume:", err)
				return 1
			}
		}
	}
}
