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
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/narad-io/storage/client"
)

// runConsume prints records from an offset on; with --follow it waits for
// new ones as they commit (long polls). A damaged frame is skipped with a
// warning on stderr; records retention deleted are skipped to the start.
// With --queue it is a queue consumer instead (runQueueConsume).
func runConsume(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("consume", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs)
	from := fs.Int64("from", 0, "first offset")
	follow := fs.Bool("follow", false, "keep waiting for new records")
	asJSON := fs.Bool("json", false, `print JSON lines: {"offset","key","value","committed_at_ms"} (and "partition" with --queue), key and value base64 with "encoding":"base64" when not UTF-8`)
	queue := fs.Bool("queue", false, "be a queue consumer: lease records (of any partition unless --partition is given), print them, ack them")
	noAck := fs.Bool("no-ack", false, "with --queue: give the records back (nack) instead of acking them: a peek")
	lease := fs.Duration("lease", 30*time.Second, "with --queue: how long a record stays leased")
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: narad-storaged consume --topic T [--partition P] [--from N] [--follow] [--json]\n"+
			"       narad-storaged consume --queue --topic T [--partition P] [--follow] [--no-ack] [--lease D] [--json]\n\n"+
			"Prints records: OFFSET<TAB>KEY<TAB>VALUE per line (bytes as stored), or JSON lines;\n"+
			"with --queue, PARTITION<TAB>OFFSET<TAB>KEY<TAB>VALUE.\n"+
			"Exit status: 0 done, 1 a fetch failed, 2 usage.\n\n")
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
	offset := *from
	for {
		var opts client.FetchOptions
		if *follow {
			opts.Wait = 30 * time.Second
		}
		res, err := c.Fetch(ctx, cf.topic, cf.partition, offset, opts)
		var e *client.Error
		switch {
		case errors.As(err, &e) && e.Code == "record_unreadable" && e.NextOffset != nil && *e.NextOffset > offset:
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
