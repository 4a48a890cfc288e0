package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/narad-io/storage/internal/e2etest"
)

// topicDescription is a topic's JSON description as docs/http-api.md
// gives it (the tests' own type, never the server's).
type topicDescription struct {
	Name           string `json:"name"`
	Incarnation    string `json:"incarnation"`
	RetentionMs    int64  `json:"retention_ms"`
	RetentionBytes int64  `json:"retention_bytes"`
	Partitions     []struct {
		Partition     int   `json:"partition"`
		HighWatermark int64 `json:"high_watermark"`
	} `json:"partitions"`
}

// TestE2E_CLITopic: topic create, list, describe, alter and delete, as
// text and as --json, with retention in the API's units and in human
// ones; what the daemon stores is read back through the API.
func TestE2E_CLITopic(t *testing.T) {
	d := startDaemon(t, t.TempDir())
	run := func(args ...string) string {
		t.Helper()
		out, errOut, code := cli(t, "", append([]string{"topic", args[0], "--addr", d.addr}, args[1:]...)...)
		if code != 0 || errOut != "" {
			t.Fatalf("topic %v: exit %d, %q %s", args, code, out, errOut)
		}
		return out
	}
	stored := func(name string) topicDescription {
		t.Helper()
		var td topicDescription
		r := d.req("GET", "/v1/topics/"+name, nil)
		e2etest.Expect(t, r, 200, "")
		r.JSON(t, &td)
		return td
	}

	out := run("create", "--topic", "orders", "--partitions", "3", "--retention-ms", "7d", "--retention-bytes", "10GiB")
	if out != "topic orders created: 3 partitions, retention 604800000 ms (7d), 10737418240 bytes (10GiB)\n" {
		t.Fatalf("create: %q", out)
	}
	if td := stored("orders"); len(td.Partitions) != 3 || td.RetentionMs != 604800000 || td.RetentionBytes != 10<<30 {
		t.Fatalf("stored after create: %+v", td)
	}
	if out := run("create", "--topic", "orders", "--partitions", "3", "--retention-ms", "604800000", "--retention-bytes", "10737418240"); !strings.HasPrefix(out, "topic orders exists as asked: 3 partitions") {
		t.Fatalf("create of an identical topic, in the API's units: %q", out)
	}
	var created topicDescription
	if err := json.Unmarshal([]byte(run("create", "--topic", "logs", "--partitions", "1", "--json")), &created); err != nil || created.Name != "logs" || len(created.Partitions) != 1 || len(created.Incarnation) != 16 {
		t.Fatalf("create --json: %+v, %v", created, err)
	}

	out = run("list")
	if !strings.HasPrefix(out, "TOPIC ") || !regexpLine(out, `logs +1 +0 +0`) || !regexpLine(out, `orders +3 +604800000 +10737418240`) {
		t.Fatalf("list:\n%s", out)
	}
	var list struct {
		Topics []topicDescription `json:"topics"`
	}
	if err := json.Unmarshal([]byte(run("list", "--json")), &list); err != nil || len(list.Topics) != 2 {
		t.Fatalf("list --json: %+v, %v", list, err)
	}

	e2etest.Expect(t, d.req("POST", "/v1/topics/orders/partitions/1/records", map[string]any{"records": []map[string]string{{"value": "a"}, {"value": "b"}}}), 200, "")
	out = run("describe", "--topic", "orders")
	if !strings.HasPrefix(out, "topic orders, incarnation "+stored("orders").Incarnation+", 3 partitions\nretention 604800000 ms (7d), 10737418240 bytes (10GiB)\n") ||
		!regexpLine(out, `PARTITION +START +HIGH-WATERMARK +SEGMENTS +BYTES`) || !regexpLine(out, `1 +0 +2 +1 +[0-9]+`) || strings.Contains(out, "OWNER") {
		t.Fatalf("describe:\n%s", out)
	}
	var described topicDescription
	if err := json.Unmarshal([]byte(run("describe", "--topic", "orders", "--json")), &described); err != nil || described.Partitions[1].HighWatermark != 2 {
		t.Fatalf("describe --json: %+v, %v", described, err)
	}

	if out := run("alter", "--topic", "orders", "--retention-ms", "36h"); out != "topic orders: retention 129600000 ms (36h), 10737418240 bytes (10GiB)\n" {
		t.Fatalf("alter --retention-ms: %q", out)
	}
	if td := stored("orders"); td.RetentionMs != 36*3600*1000 || td.RetentionBytes != 10<<30 {
		t.Fatalf("stored after alter of the age alone: %+v (the size bound must stay)", td)
	}
	var altered topicDescription
	if err := json.Unmarshal([]byte(run("alter", "--topic", "orders", "--retention-bytes", "0", "--json")), &altered); err != nil || altered.RetentionBytes != 0 || altered.RetentionMs != 36*3600*1000 {
		t.Fatalf("alter --retention-bytes 0 --json: %+v, %v", altered, err)
	}

	if out := run("delete", "--topic", "logs"); out != "topic logs deleted\n" {
		t.Fatalf("delete: %q", out)
	}
	e2etest.Expect(t, d.req("GET", "/v1/topics/logs", nil), 404, "topic_not_found")
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("exit: %v\n%s", err, d.log())
	}
}

// TestE2E_CLITopicErrors: what the daemon refuses is printed with its
// code and message, exit 1; what the command refuses before asking is a
// usage error, exit 2, and nothing is made.
func TestE2E_CLITopicErrors(t *testing.T) {
	d := startDaemon(t, t.TempDir())
	topic := func(args ...string) (string, string, int) {
		t.Helper()
		return cli(t, "", append([]string{"topic", args[0], "--addr", d.addr}, args[1:]...)...)
	}
	if _, errOut, code := topic("create", "--topic", "orders", "--partitions", "2"); code != 0 {
		t.Fatalf("create: exit %d, %s", code, errOut)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"create", "--topic", "orders", "--partitions", "4"}, "topic create: narad: topic_exists (409): "},
		{[]string{"describe", "--topic", "missing"}, "topic describe: narad: topic_not_found (404): "},
		{[]string{"alter", "--topic", "missing", "--retention-ms", "1h"}, "topic alter: narad: topic_not_found (404): "},
		{[]string{"delete", "--topic", "missing"}, "topic delete: narad: topic_not_found (404): "},
		{[]string{"create", "--topic", "bad name", "--partitions", "1"}, "topic create: narad: invalid_topic_name (400): "},
		{[]string{"create", "--topic", "zero", "--partitions", "0"}, "topic create: narad: invalid_body (400): "},
	} {
		out, errOut, code := topic(tc.args...)
		if code != 1 || out != "" || !strings.HasPrefix(errOut, tc.want) || len(errOut) <= len(tc.want)+1 {
			t.Errorf("topic %v: exit %d, %q, stderr %q; want exit 1 and %q with the daemon's message", tc.args, code, out, errOut, tc.want)
		}
	}
	for _, args := range [][]string{
		{"create", "--topic", "x"}, // no --partitions
		{"create", "--topic", "x", "--partitions", "1", "--retention-ms", "7x"}, // a unit it does not know
		{"create", "--topic", "x", "--partitions", "1", "--retention-bytes", "-1"},
		{"create", "--topic", "x", "--partitions", "1", "--partition", "1"}, // a flag of other commands
		{"alter", "--topic", "orders"},                                      // nothing to change
		{"describe"},                                                        // no --topic
		{"list", "--topic", "orders"},
		{"rename", "--topic", "orders"},
	} {
		if _, errOut, code := topic(args...); code != 2 || errOut == "" {
			t.Errorf("topic %v: exit %d, %q; want a usage error, exit 2", args, code, errOut)
		}
	}
	var list struct {
		Topics []topicDescription `json:"topics"`
	}
	r := d.req("GET", "/v1/topics", nil)
	r.JSON(t, &list)
	if len(list.Topics) != 1 || list.Topics[0].Name != "orders" || len(list.Topics[0].Partitions) != 2 {
		t.Fatalf("after the refusals the daemon holds %+v; want orders alone, as made", list.Topics)
	}
	if _, _, code := cli(t, "", "topic"); code != 2 {
		t.Fatalf("topic without a subcommand: exit %d, want 2", code)
	}
	if out, _, code := cli(t, "", "topic", "--help"); code != 0 || !strings.Contains(out, "-retention-bytes") {
		t.Fatalf("topic --help: exit %d, %q", code, out)
	}
}

// regexpLine reports whether a line of out is re, trailing spaces aside.
func regexpLine(out, re string) bool {
	return regexp.MustCompile(`(?m)^` + re + ` *$`).MatchString(out)
}
