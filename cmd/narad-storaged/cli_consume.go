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
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/narad-io/storage/client"
)

// runConsume prints records from an offset on; with --follow it waits for
// new ones as they commit (long polls). A damaged frame is skipped with a
// warning on stderr; records retention deleted are skipped to the start.
func runConsume(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("consume", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs)
	from := fs.Int64("from", 0, "first offset")
	follow := fs.Bool("follow", false, "keep waiting for new records")
	asJSON := fs.Bool("json", false, `print JSON lines: {"offset","key","value","committed_at_ms"}, key and value base64 with "encoding":"base64" when not UTF-8`)
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: narad-storaged consume --topic T [--partition P] [--from N] [--follow] [--json]\n\n"+
			"Prints records: OFFSET<TAB>KEY<TAB>VALUE per line (bytes as stored), or JSON lines.\n"+
			"Exit status: 0 done, 1 a fetch failed, 2 usage.\n\n")
		fs.PrintDefaults()
	}
	if code, done := parseClientCommand(fs, args, stderr); done {
		return code
	}
	c, err := cf.client()
	if err != nil {
		fmt.Fprintln(stderr, "consume:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
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
