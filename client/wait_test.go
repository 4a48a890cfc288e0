package client

import (
	"context"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"
)

// TestWaitTopic_SendsEveryPositionAndReadsTheAnswer: the positions go in
// partition order with wait_ms and the incarnation, and the answer's
// ready and not-here partitions come back as sent.
func TestWaitTopic_SendsEveryPositionAndReadsTheAnswer(t *testing.T) {
	var sent string
	c := fakeClient(t, func(r *http.Request) *http.Response {
		b, _ := io.ReadAll(r.Body)
		sent = r.Method + " " + r.URL.Path + " " + string(b)
		return answer(200, `{"ready":[{"partition":2,"high_watermark":9}],"not_here":[5],"incarnation":"0123456789abcdef"}`)
	}, Options{})
	got, err := c.WaitTopic(context.Background(), "orders", map[int]int64{5: 0, 2: 7, 0: 3}, 30*time.Second, "0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	want := `POST /v1/topics/orders/wait {"positions":[{"partition":0,"offset":3},{"partition":2,"offset":7},{"partition":5,"offset":0}],"wait_ms":30000,"incarnation":"0123456789abcdef"}`
	if sent != want {
		t.Fatalf("sent %s\nwant %s", sent, want)
	}
	if !slices.Equal(got.Ready, []PartitionHighWatermark{{Partition: 2, HighWatermark: 9}}) || !slices.Equal(got.NotHere, []int{5}) || got.Incarnation != "0123456789abcdef" {
		t.Fatalf("answer %+v", got)
	}
}
