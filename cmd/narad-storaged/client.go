package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/narad-io/storage/internal/fsys"
)

// client talks to a running daemon, for the produce and consume commands.
type client struct {
	base  string
	token string
	http  *http.Client
}

func clientFlags(name string, stderr io.Writer) (*flag.FlagSet, *string, *string, *int, *string) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "http://127.0.0.1:7480", "the daemon's address")
	topic := fs.String("topic", "", "topic (required)")
	partition := fs.Int("partition", 0, "partition")
	tokenFile := fs.String("auth-token-file", "", "file holding the bearer token, if the daemon needs one")
	return fs, addr, topic, partition, tokenFile
}

func newClient(addr, tokenFile string) (*client, error) {
	c := &client{base: strings.TrimRight(addr, "/"), http: &http.Client{}}
	if tokenFile != "" {
		b, err := fsys.ReadFile(fsys.OS{}, tokenFile, 4096)
		if err != nil {
			return nil, err
		}
		c.token = strings.TrimSpace(string(b))
	}
	return c, nil
}

func (c *client) do(method, path string, body []byte, out any) error {
	req, err := http.NewRequest(method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var e errorBody
		if json.Unmarshal(b, &e) == nil && e.Error.Code != "" {
			return fmt.Errorf("%s: %s (%d)", e.Error.Code, e.Error.Message, resp.StatusCode)
		}
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
	}
	return json.Unmarshal(b, out)
}

// runProduce sends each line of stdin as one record and prints its offset.
func runProduce(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs, addr, topic, partition, tokenFile := clientFlags("produce", stderr)
	key := fs.String("key", "", "key of every record")
	if err := fs.Parse(args); err != nil || *topic == "" {
		fmt.Fprintln(stderr, "produce: --topic is required")
		return 2
	}
	c, err := newClient(*addr, *tokenFile)
	if err != nil {
		fmt.Fprintln(stderr, "produce:", err)
		return 2
	}
	path := fmt.Sprintf("/v1/topics/%s/partitions/%d/records", url.PathEscape(*topic), *partition)
	sc := bufio.NewScanner(stdin)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		rec := map[string]string{"value": sc.Text()}
		if *key != "" {
			rec["key"] = *key
		}
		body, _ := json.Marshal(map[string]any{"records": []map[string]string{rec}})
		var out struct {
			BaseOffset int64 `json:"base_offset"`
		}
		if err := c.do(http.MethodPost, path, body, &out); err != nil {
			fmt.Fprintln(stderr, "produce:", err)
			return 1
		}
		fmt.Fprintln(stdout, out.BaseOffset)
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(stderr, "produce:", err)
		return 1
	}
	return 0
}

// runConsume prints records from an offset on; with --follow it waits for
// new ones as they commit (long polls).
func runConsume(args []string, stdout, stderr io.Writer) int {
	fs, addr, topic, partition, tokenFile := clientFlags("consume", stderr)
	from := fs.Int64("from", 0, "first offset")
	follow := fs.Bool("follow", false, "keep waiting for new records")
	if err := fs.Parse(args); err != nil || *topic == "" {
		fmt.Fprintln(stderr, "consume: --topic is required")
		return 2
	}
	c, err := newClient(*addr, *tokenFile)
	if err != nil {
		fmt.Fprintln(stderr, "consume:", err)
		return 2
	}
	c.http.Timeout = 2 * time.Minute
	offset := *from
	for {
		wait := 0
		if *follow {
			wait = 30000
		}
		path := fmt.Sprintf("/v1/topics/%s/partitions/%d/records?offset=%d&wait_ms=%d", url.PathEscape(*topic), *partition, offset, wait)
		var out struct {
			Records       []fetchedRecord `json:"records"`
			NextOffset    int64           `json:"next_offset"`
			HighWatermark int64           `json:"high_watermark"`
		}
		if err := c.do(http.MethodGet, path, nil, &out); err != nil {
			fmt.Fprintln(stderr, "consume:", err)
			return 1
		}
		for _, r := range out.Records {
			key := ""
			if r.Key != nil {
				key = *r.Key
			}
			fmt.Fprintf(stdout, "%d\t%s\t%s\n", r.Offset, key, r.Value)
		}
		offset = out.NextOffset
		if !*follow && offset >= out.HighWatermark {
			return 0
		}
	}
}
