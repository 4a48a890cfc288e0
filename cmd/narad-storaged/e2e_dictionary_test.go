package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/narad-io/storage/internal/e2etest"
)

// TestE2E_CLITopicDictionary: topic train-dictionary refuses an empty
// topic (exit 1, the daemon's code), trains one on produced records, and
// topic dictionaries lists it as current, as text and as --json; records
// produced after it read back as sent.
func TestE2E_CLITopicDictionary(t *testing.T) {
	d := startDaemon(t, t.TempDir())
	e2etest.Expect(t, d.req("PUT", "/v1/topics/orders", map[string]any{"partitions": 1}), 201, "")
	_, errOut, code := cli(t, "", "topic", "train-dictionary", "--addr", d.addr, "--topic", "orders")
	if code != 1 || !strings.Contains(errOut, "dictionary_refused") {
		t.Fatalf("training an empty topic: exit %d, %q", code, errOut)
	}
	produce := func(from int) {
		for i := from; i < from+100; i++ {
			value := fmt.Sprintf(`{"order_id":%d,"status":"paid","currency":"EUR","total_cents":%d}`, i, 1000+i%97)
			e2etest.Expect(t, d.req("POST", "/v1/topics/orders/partitions/0/records", map[string]any{"records": []map[string]string{{"value": value}}}), 200, "")
		}
	}
	produce(0)
	out, errOut, code := cli(t, "", "topic", "train-dictionary", "--addr", d.addr, "--topic", "orders", "--samples", "100", "--max-bytes", "4KiB")
	if code != 2 {
		t.Fatalf("--max-bytes 4KiB (not a number): exit %d, %q %q", code, out, errOut)
	}
	out, errOut, code = cli(t, "", "topic", "train-dictionary", "--addr", d.addr, "--topic", "orders", "--samples", "100", "--max-bytes", "4096")
	if code != 0 || errOut != "" || !regexpLine(out, `topic orders: dictionary [0-9]+, [0-9]+ bytes, trained on 100 records; new frames use it`) {
		t.Fatalf("train-dictionary: exit %d, %q %q", code, out, errOut)
	}
	out, _, code = cli(t, "", "topic", "dictionaries", "--addr", d.addr, "--topic", "orders")
	if code != 0 || !regexpLine(out, `ID +BYTES +TRAINED +CURRENT`) || !regexpLine(out, `[0-9]+ +[0-9]+ +\S+ +true`) {
		t.Fatalf("dictionaries: exit %d\n%s", code, out)
	}
	out, _, code = cli(t, "", "topic", "dictionaries", "--addr", d.addr, "--topic", "orders", "--json")
	var list struct {
		Dictionaries []struct {
			ID      uint32 `json:"id"`
			Current bool   `json:"current"`
		} `json:"dictionaries"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list.Dictionaries) != 1 || !list.Dictionaries[0].Current {
		t.Fatalf("dictionaries --json: exit %d, %q", code, out)
	}
	produce(100)
	out, errOut, code = cli(t, "", "topic", "alter", "--addr", d.addr, "--topic", "orders", "--dictionary-after", "5000")
	if code != 0 || out != "topic orders: retention none, none; a dictionary after 5000 records\n" {
		t.Fatalf("alter --dictionary-after: exit %d, %q %q", code, out, errOut)
	}
	var fetched struct {
		Records []struct {
			Value string `json:"value"`
		} `json:"records"`
	}
	r := d.req("GET", "/v1/topics/orders/partitions/0/records?offset=100&max_records=100", nil)
	e2etest.Expect(t, r, 200, "")
	r.JSON(t, &fetched)
	if len(fetched.Records) != 100 || fetched.Records[0].Value != `{"order_id":100,"status":"paid","currency":"EUR","total_cents":1003}` {
		t.Fatalf("records after the dictionary: %d, first %+v", len(fetched.Records), fetched.Records[:min(1, len(fetched.Records))])
	}
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("exit: %v\n%s", err, d.log())
	}
}
