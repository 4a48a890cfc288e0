package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/narad-io/storage/api"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
)

// TestWaitTopic_OneLongPollForEveryPartition: POST .../wait at every
// partition's high watermark waits, and answers the partition a commit
// advanced as soon as it commits, with the topic's incarnation.
func TestWaitTopic_OneLongPollForEveryPartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		node, a := reviewNode(t, Options{})
		if _, _, err := node.CreateTopic(ctx, "orders", 3, runtime.Retention{}); err != nil {
			t.Fatal(err)
		}
		poll, polled := httptest.NewRecorder(), make(chan struct{})
		go func() {
			defer close(polled)
			body := `{"positions":[{"partition":0,"offset":0},{"partition":1,"offset":0},{"partition":2,"offset":0}],"wait_ms":60000}`
			a.ServeHTTP(poll, httptest.NewRequest(http.MethodPost, "/v1/topics/orders/wait", strings.NewReader(body)))
		}()
		synctest.Wait()
		select {
		case <-polled:
			t.Fatalf("answered with nothing committed: %d %s", poll.Code, poll.Body.String())
		default:
		}
		if _, err := node.Produce(ctx, "orders", 1, []partition.Record{{Value: []byte("r")}, {Value: []byte("s")}}); err != nil {
			t.Fatal(err)
		}
		<-polled
		var got api.TopicWaitAnswer
		if err := json.Unmarshal(poll.Body.Bytes(), &got); err != nil || poll.Code != http.StatusOK {
			t.Fatalf("%d %s: %v", poll.Code, poll.Body.String(), err)
		}
		if len(got.Ready) != 1 || got.Ready[0] != (api.PartitionHighWatermark{Partition: 1, HighWatermark: 2}) || got.Incarnation == "" || len(got.NotHere) != 0 {
			t.Fatalf("answer %+v; want partition 1 at 2, the incarnation", got)
		}
	})
}

// TestWaitTopic_Refusals: a wait's body is checked before it waits, and
// an answer names what is wrong.
func TestWaitTopic_Refusals(t *testing.T) {
	_, a := reviewNode(t, Options{})
	for _, c := range []struct {
		topic, body string
		status      int
		code        string
	}{
		{"t", `{"positions":[]}`, 400, api.CodeInvalidBody},
		{"t", `{"positions":[{"partition":0,"offset":0},{"partition":0,"offset":1}]}`, 400, api.CodeInvalidBody},
		{"t", `{"positions":[{"partition":0,"offset":-1}]}`, 400, api.CodeInvalidBody},
		{"t", `{"positions":[{"partition":0,"offset":0}],"wait_ms":60001}`, 400, api.CodeInvalidBody},
		{"t", `{"positions":[{"partition":0,"offset":0}],"incarnation":"xyz"}`, 400, api.CodeInvalidBody},
		{"t", `{"positions":[{"partition":0,"offset":0}],"incarnation":"0123456789abcdef"}`, 404, api.CodeTopicNotFound},
		{"t", `{"positions":[{"partition":1,"offset":0}]}`, 404, api.CodePartitionNotFound},
		{"t", `{"positions":[{"partition":0,"offset":0}],"max":1}`, 400, api.CodeInvalidBody},
		{"t", `{"positions":[{"partiton":0,"offset":0}]}`, 400, api.CodeInvalidBody},
		{"t", `{"positions":[{"partition":0}]}`, 400, api.CodeInvalidBody},
		{"nope", `{"positions":[{"partition":0,"offset":0}]}`, 404, api.CodeTopicNotFound},
	} {
		w := httptest.NewRecorder()
		a.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/topics/"+c.topic+"/wait", strings.NewReader(c.body)))
		var e api.ErrorBody
		json.Unmarshal(w.Body.Bytes(), &e)
		if w.Code != c.status || e.Error.Code != c.code {
			t.Errorf("%s %s: %d %s; want %d %s", c.topic, c.body, w.Code, w.Body.String(), c.status, c.code)
		}
	}
}
