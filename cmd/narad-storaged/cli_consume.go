package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/narad-io/storage/client"
)

// runConsume prints records from an offset on; with --follow it waits for
// new ones as they commit (long polls). A damaged frame stops it (exit 1,
// naming the offsets), or with --skip-damaged is stepped over with a
// warning on stderr; records retention deleted are skipped to the start.
// With --queue it is a queue consumer instead (runQueueConsume).
func runConsume(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("consume", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs)
	from := fs.String("from", "earliest", "where to start: earliest, latest, an offset, or a time (RFC 3339: the first record committed at or after it); with --cursor, where a new cursor starts: earliest or latest")
	cursorName := fs.String("cursor", "", "read through the fan-out cursor NAME: resume where it stands (made at --from if the topic has none), and move it past what is printed")
	follow := fs.Bool("follow", false, "keep waiting for new records")
	asJSON := fs.Bool("json", false, `print JSON lines: {"offset","key","value","committed_at_ms"} (and "partition" with --queue), key and value base64 with "encoding":"base64" when not UTF-8`)
	skipDamaged := fs.Bool("skip-damaged", false, "step over the records of a damaged frame (saying so on stderr) instead of stopping there")
	queue := fs.Bool("queue", false, "be a queue consumer: lease records (of any partition unless --partition is given), print them, ack them")
	noAck := fs.Bool("no-ack", false, "with --queue: give the records back (nack) instead of acking them: a peek")
	lease := fs.Duration("lease", 30*time.Second, "with --queue: how long a record stays leased")
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: narad-storaged consume --topic T [--partition P] [--from N] [--follow] [--json]\n"+
			"       narad-storaged consume --queue --topic T [--partition P] [--follow] [--no-ack] [--lease D] [--json]\n"+
			"       narad-storaged consume --cursor NAME --topic T [--partition P] [--from earliest|latest] [--follow] [--json]\n\n"+
			"Prints records: OFFSET<TAB>KEY<TAB>VALUE per line (bytes as stored), or JSON lines;\n"+
			"with --queue, PARTITION<TAB>OFFSET<TAB>KEY<TAB>VALUE.\n"+
			"Exit status: 0 done, 1 a fetch failed (or met a damaged frame without --skip-damaged), 2 usage.\n\n")
		fs.PrintDefaults()
	}
	if code, done := parseClientCommand(fs, args, stderr); done {
		return code
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !*queue && (set["no-ack"] || set["lease"]) {
		fmt.Fprintln(stderr, "consume: --no-ack and --lease are for --queue")
		return 2
	}
	if *queue && set["from"] {
		fmt.Fprintln(stderr, "consume: --from is not for --queue: a queue consumer leases what nobody acked")
		return 2
	}
	if (*queue || *cursorName != "") && set["skip-damaged"] {
		fmt.Fprintln(stderr, "consume: a queue consumer or a cursor always steps over damaged records (the node settles them); --skip-damaged is for a replay")
		return 2
	}
	if *queue && *cursorName != "" {
		fmt.Fprintln(stderr, "consume: --queue and --cursor are two kinds of reader; give one")
		return 2
	}
	if *cursorName != "" && *from != "earliest" && *from != "latest" {
		fmt.Fprintln(stderr, "consume: with --cursor, --from is where a new cursor starts: earliest or latest")
		return 2
	}
	if *noAck && *follow {
		fmt.Fprintln(stderr, "consume: --no-ack is a one-time peek; it does not go with --follow")
		return 2
	}
	if *queue && *lease < time.Millisecond {
		fmt.Fprintln(stderr, "consume: --lease must be at least 1ms")
		return 2
	}
	c, err := cf.client()
	if err != nil {
		fmt.Fprintln(stderr, "consume:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if *queue {
		opts := client.ConsumeOptions{OnlyPartition: set["partition"], Partition: cf.partition, MaxRecords: 1000, Lease: *lease}
		return runQueueConsume(ctx, c, cf.topic, opts, *follow, *noAck, *asJSON, stdout, stderr)
	}
	print := printText
	if *asJSON {
		print = printJSON
	}
	if *cursorName != "" {
		return runCursorConsume(ctx, c, cf.topic, *cursorName, cf.partition, client.CursorFrom(*from), *follow, print, stdout, stderr)
	}
	offset, code := startOffset(ctx, c, cf.topic, cf.partition, *from, stderr)
	if code >= 0 {
		return code
	}
	for {
		var opts client.FetchOptions
		if *follow {
			opts.Wait = 30 * time.Second
		}
		res, err := c.Fetch(ctx, cf.topic, cf.partition, offset, opts)
		var e *client.Error
		switch {
		case errors.As(err, &e) && e.Code == "record_unreadable" && e.NextOffset != nil && *e.NextOffset > offset:
			if !*skipDamaged {
				fmt.Fprintf(stderr, "consume: offsets %d..%d are in a damaged frame; --skip-damaged (or --from %d) steps over them\n", offset, *e.NextOffset-1, *e.NextOffset)
				return 1
			}
			fmt.Fprintf(stderr, "consume: offsets %d..%d are in a damaged frame; skipped\n", offset, *e.NextOffset-1)
			offset = *e.NextOffset
			continue
		case errors.As(err, &e) && e.Code == "offset_deleted" && e.StartOffset != nil && *e.StartOffset > offset:
			fmt.Fprintf(stderr, "consume: offsets %d..%d were deleted by retention; skipped\n", offset, *e.StartOffset-1)
			offset = *e.StartOffset
			continue
		case errors.Is(err, context.Canceled):
			return 0
		case err != nil:
			fmt.Fprintln(stderr, "consume:", err)
			return 1
		}
		for _, r := range res.Records {
			if err := print(stdout, r); err != nil {
				fmt.Fprintln(stderr, "consume:", err)
				return 1
			}
		}
		offset = res.NextOffset
		if !*follow && offset >= res.HighWatermark {
			return 0
		}
	}
}

// startOffset resolves --from: earliest (0: a read below the start steps
// to it), latest (the high watermark now), a time (the first record
// committed at or after it) or an offset. code is -1 when it did, else
// the exit status.
func startOffset(ctx context.Context, c *client.Client, topic string, p int, from string, stderr io.Writer) (offset int64, code int) {
	switch from {
	case "earliest":
		return 0, -1
	case "latest":
		f, err := c.Fetch(ctx, topic, p, 0, client.FetchOptions{MaxRecords: 1, MaxBytes: 1})
		var e *client.Error
		if errors.As(err, &e) && (e.Code == "offset_deleted" || e.Code == "record_unreadable") {
			st, serr := c.Consumer(ctx, topic, p)
			if serr != nil {
				fmt.Fprintln(stderr, "consume:", serr)
				return 0, 1
			}
			return st.HighWatermark, -1
		}
		if err != nil {
			fmt.Fprintln(stderr, "consume:", err)
			return 0, 1
		}
		return f.HighWatermark, -1
	}
	if at, err := time.Parse(time.RFC3339Nano, from); err == nil {
		offset, err := c.OffsetAt(ctx, topic, p, at)
		if err != nil {
			fmt.Fprintln(stderr, "consume:", err)
			return 0, 1
		}
		return offset, -1
	}
	offset, err := strconv.ParseInt(from, 10, 64)
	if err != nil || offset < 0 {
		fmt.Fprintf(stderr, "consume: --from %q: want earliest, latest, an offset from 0 up, or an RFC 3339 time\n", from)
		return 0, 2
	}
	return offset, -1
}

// runCursorConsume reads one partition through a fan-out cursor: each
// batch is peeked, printed, then committed, so a consumer killed between
// print and commit prints those records again, never loses them. The
// cursor is made at from if the topic has none of that name.
func runCursorConsume(ctx context.Context, c *client.Client, topic, name string, p int, from client.CursorFrom, follow bool,
	print func(io.Writer, client.FetchedRecord) error, stdout, stderr io.Writer) int {
	if _, _, err := c.CreateCursor(ctx, topic, name, from); err != nil {
		fmt.Fprintln(stderr, "consume:", err)
		return 1
	}
	for {
		opts := client.CursorReadOptions{Peek: true}
		if follow {
			opts.Wait = 30 * time.Second
		}
		res, err := c.ReadCursor(ctx, topic, name, p, opts)
		switch {
		case errors.Is(err, context.Canceled):
			return 0
		case err != nil:
			fmt.Fprintln(stderr, "consume:", err)
			return 1
		}
		if res.Skipped > 0 {
			fmt.Fprintf(stderr, "consume: %d records before offset %d are in a damaged frame; skipped\n", res.Skipped, res.NextOffset)
		}
		for _, r := range res.Records {
			if err := print(stdout, r); err != nil {
				fmt.Fprintln(stderr, "consume:", err)
				return 1
			}
		}
		if len(res.Records) > 0 || res.Skipped > 0 {
			if err := c.CommitCursor(context.WithoutCancel(ctx), topic, name, p, res.NextOffset); err != nil {
				fmt.Fprintln(stderr, "consume:", err)
				return 1
			}
		}
		if !follow && res.NextOffset >= res.HighWatermark {
			return 0
		}
	}
}

// runQueueConsume leases records, prints them and acks them (nacks them
// with noAck), until a consume finds nothing free or, with follow, until
// interrupted. A record is acked only once printed: a consumer killed in
// between leaves it to be leased again when its lease runs out.
func runQueueConsume(ctx context.Context, c *client.Client, topic string, opts client.ConsumeOptions, follow, noAck, asJSON bool, stdout, stderr io.Writer) int {
	if follow {
		opts.Wait = 30 * time.Second
	}
	for {
		recs, err := c.Consume(ctx, topic, opts)
		switch {
		case errors.Is(err, context.Canceled):
			return 0
		case err != nil:
			fmt.Fprintln(stderr, "consume:", err)
			return 1
		}
		if len(recs) == 0 && !follow {
			return 0
		}
		type lease struct {
			partition int
			id        uint64
		}
		settle := map[lease][]int64{}
		for _, r := range recs {
			fr := client.FetchedRecord{Offset: r.Offset, Key: r.Key, Value: r.Value, CommittedAt: r.CommittedAt}
			if err := printLeased(stdout, r.Partition, fr, asJSON); err != nil {
				fmt.Fprintln(stderr, "consume:", err)
				return 1
			}
			k := lease{r.Partition, r.LeaseID}
			settle[k] = append(settle[k], r.Offset)
		}
		for k, offsets := range settle {
			if noAck {
				_, err = c.Nack(context.WithoutCancel(ctx), topic, k.partition, k.id, offsets...)
			} else {
				_, err = c.Ack(context.WithoutCancel(ctx), topic, k.partition, offsets...)
			}
			if err != nil {
				fmt.Fprintln(stderr, "consume:", err)
				return 1
			}
		}
		if noAck {
			return 0 // what was given back would be leased again at once
		}
	}
}

// printLeased prints a leased record: its partition, then what printText
// or printJSON print.
func printLeased(w io.Writer, p int, r client.FetchedRecord, asJSON bool) error {
	if !asJSON {
		_, err := fmt.Fprintf(w, "%d\t%d\t%s\t%s\n", p, r.Offset, r.Key, r.Value)
		return err
	}
	var b strings.Builder
	if err := printJSON(&b, r); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "{\"partition\":%d,%s", p, strings.TrimPrefix(b.String(), "{"))
	return err
}

func printText(w io.Writer, r client.FetchedRecord) error {
	_, err := fmt.Fprintf(w, "%d\t%s\t%s\n", r.Offset, r.Key, r.Value)
	return err
}

func printJSON(w io.Writer, r client.FetchedRecord) error {
	line := struct {
		Offset        int64   `json:"offset"`
		Key           *string `json:"key,omitempty"`
		Value         string  `json:"value"`
		Encoding      string  `json:"encoding,omitempty"`
		CommittedAtMs int64   `json:"committed_at_ms"`
	}{Offset: r.Offset, Value: string(r.Value), CommittedAtMs: r.CommittedAt.UnixMilli()}
	if !utf8.Valid(r.Key) || !utf8.Valid(r.Value) {
		line.Encoding, line.Value = "base64", base64.StdEncoding.EncodeToString(r.Value)
	}
	if len(r.Key) > 0 {
		k := string(r.Key)
		if line.Encoding != "" {
			k = base64.StdEncoding.EncodeToString(r.Key)
		}
		line.Key = &k
	}
	return json.NewEncoder(w).Encode(line)
}
