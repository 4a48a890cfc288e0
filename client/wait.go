package client

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/narad-io/storage/api"
)

// TopicWait is a topic-wide wait's answer: the partitions named whose
// high watermark is not the position given (records past it, or a
// boundary that moved back, which a fetch there then reports; -1 when the
// node cannot know it without opening the partition, which a fetch
// does), in partition order; those the node asked does not own, which it did not
// wait on (ask their owners: a fetch of one follows to its owner); and
// the topic's incarnation.
type TopicWait struct {
	Ready       []PartitionHighWatermark
	NotHere     []int
	Incarnation string
}

// PartitionHighWatermark is a partition's high watermark.
type PartitionHighWatermark = api.PartitionHighWatermark

// WaitTopic waits up to wait (at most 60 s) until any partition of
// positions (partition -> the offset the reader is at) has a high
// watermark elsewhere, and answers those partitions; at the end of wait,
// none (docs/http-api.md, "Wait for records across a topic"). One call
// stands for a long poll of every partition named, and holds no log open
// on the node. With incarnation (a fetch's answer gives it) a topic
// deleted and made again under its name answers ErrTopicNotFound.
func (c *Client) WaitTopic(ctx context.Context, topic string, positions map[int]int64, wait time.Duration, incarnation string) (TopicWait, error) {
	return c.waitTopic(ctx, nil, topic, positions, wait, incarnation)
}

// waitTopic is WaitTopic asked of node (nil: the client's own): a
// Consumer asks each owner for the partitions it owns.
func (c *Client) waitTopic(ctx context.Context, node *url.URL, topic string, positions map[int]int64, wait time.Duration, incarnation string) (TopicWait, error) {
	body := api.TopicWaitRequest{Incarnation: incarnation, Positions: make([]api.PartitionPosition, 0, len(positions))}
	for _, p := range slices.Sorted(keysOf(positions)) {
		body.Positions = append(body.Positions, api.PartitionPosition{Partition: p, Offset: positions[p]})
	}
	if wait > 0 {
		waitMs := int(wait.Milliseconds())
		body.WaitMs = &waitMs
	}
	b, err := jsonBody(body)
	if err != nil {
		return TopicWait{}, err
	}
	resp, err := c.do(ctx, request{method: http.MethodPost, path: topicPath(topic) + "/wait", body: b, contentType: "application/json", node: node})
	if err != nil {
		return TopicWait{}, err
	}
	defer drain(resp)
	var out api.TopicWaitAnswer
	if err := decodeJSON(resp, &out); err != nil {
		return TopicWait{}, err
	}
	return TopicWait{Ready: out.Ready, NotHere: out.NotHere, Incarnation: out.Incarnation}, nil
}

func keysOf[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
