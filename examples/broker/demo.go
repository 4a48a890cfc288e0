package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/narad-io/storage/client"
)

// demo runs a broker alone on a temporary directory and a loopback port,
// produces through its API, reads back through the API and through the
// broker's own route on the same server, and closes it.
func demo(ctx context.Context, out io.Writer) error {
	dir, err := os.MkdirTemp("", "narad-broker")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	b, err := startBroker(ctx, options{listen: "127.0.0.1:0", dataDir: dir})
	if err != nil {
		return err
	}
	err = greet(ctx, b, out)
	if cerr := b.close(); err == nil {
		err = cerr
	}
	if err == nil {
		fmt.Fprintln(out, "narad-broker-example: ok")
	}
	return err
}

// greet makes a topic of two partitions through the broker's API,
// produces a record a partition, and checks both the API and the
// broker's own route see them.
func greet(ctx context.Context, b *broker, out io.Writer) error {
	c, err := client.New(b.url, client.Options{})
	if err != nil {
		return err
	}
	if _, _, err := c.CreateTopic(ctx, "greetings", 2, client.Retention{}); err != nil {
		return err
	}
	for p := range 2 {
		if _, err := c.Produce(ctx, "greetings", p, []client.Record{{Value: fmt.Appendf(nil, "hello from partition %d", p)}}); err != nil {
			return err
		}
		got, err := c.Fetch(ctx, "greetings", p, 0, client.FetchOptions{})
		if err != nil {
			return err
		}
		if len(got.Records) != 1 || string(got.Records[0].Value) != fmt.Sprintf("hello from partition %d", p) {
			return fmt.Errorf("partition %d holds %+v", p, got.Records)
		}
		fmt.Fprintf(out, "API: greetings/%d: %q\n", p, got.Records[0].Value)
	}
	owned, err := ownPartitions(ctx, b.url)
	if err != nil {
		return err
	}
	if len(owned) != 2 || owned[0].HighWatermark != 1 || owned[1].HighWatermark != 1 {
		return fmt.Errorf("the broker's own route lists %+v", owned)
	}
	fmt.Fprintf(out, "GET /broker/partitions: %+v\n", owned)
	return nil
}

// ownPartitions asks the broker at url's own route what it owns.
func ownPartitions(ctx context.Context, url string) ([]partitionStatus, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/broker/partitions", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("GET /broker/partitions: %s: %s", resp.Status, b)
	}
	var answer struct {
		Partitions []partitionStatus `json:"partitions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		return nil, err
	}
	return answer.Partitions, nil
}
