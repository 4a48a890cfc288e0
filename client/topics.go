package client

import (
	"context"
	"net/http"
)

// Topic describes a topic and its partitions.
type Topic struct {
	Name           string      `json:"name"`
	Incarnation    string      `json:"incarnation"`
	RetentionMs    int64       `json:"retention_ms"`
	RetentionBytes int64       `json:"retention_bytes"`
	Partitions     []Partition `json:"partitions"`
}

// Retention bounds what each partition of a topic keeps: records older
// than Ms milliseconds, and the oldest segments while a partition holds
// more than Bytes; 0 is no bound, either or both may be set.
type Retention struct {
	Ms    int64
	Bytes int64
}

// Partition describes one partition of a topic.
type Partition struct {
	Partition     int   `json:"partition"`
	StartOffset   int64 `json:"start_offset"`
	HighWatermark int64 `json:"high_watermark"`
	Segments      int   `json:"segments"`
	Bytes         int64 `json:"bytes"`
	// Owner is the node that serves the partition, from a node of a
	// cluster; nil from a node alone, or while the partition has none.
	Owner *Owner `json:"owner,omitempty"`
	// Remote: another node than the one asked serves the partition, and
	// the figures above are zero; ask the owner.
	Remote bool `json:"remote,omitempty"`
}

// CreateTopic creates a topic of partitions partitions under retention
// (the zero value keeps everything). An identical topic is returned with
// created false; a different one is ErrTopicExists.
func (c *Client) CreateTopic(ctx context.Context, name string, partitions int, retention Retention) (t Topic, created bool, err error) {
	req := request{method: http.MethodPut, path: topicPath(name), contentType: "application/json"}
	req.body, err = jsonBody(map[string]any{"partitions": partitions, "retention_ms": retention.Ms, "retention_bytes": retention.Bytes})
	if err != nil {
		return t, false, err
	}
	resp, err := c.do(ctx, req)
	if err != nil {
		return t, false, err
	}
	defer drain(resp)
	return t, resp.StatusCode == http.StatusCreated, decodeJSON(resp, &t)
}

// Topic describes a topic.
func (c *Client) Topic(ctx context.Context, name string) (Topic, error) {
	var t Topic
	return t, c.doJSON(ctx, http.MethodGet, topicPath(name), nil, &t)
}

// Topics describes every topic.
func (c *Client) Topics(ctx context.Context) ([]Topic, error) {
	var out struct {
		Topics []Topic `json:"topics"`
	}
	return out.Topics, c.doJSON(ctx, http.MethodGet, "/v1/topics", nil, &out)
}

// SetRetention changes what a topic keeps (both bounds; 0 is none).
func (c *Client) SetRetention(ctx context.Context, name string, retention Retention) (Topic, error) {
	return c.UpdateRetention(ctx, name, RetentionChange{Ms: &retention.Ms, Bytes: &retention.Bytes})
}

// RetentionChange changes some of a topic's bounds: a nil one keeps its
// value.
type RetentionChange struct {
	Ms, Bytes *int64
}

// UpdateRetention changes the bounds change gives, keeping the others; the
// daemon merges atomically, so updates of different bounds at once both
// land.
func (c *Client) UpdateRetention(ctx context.Context, name string, change RetentionChange) (Topic, error) {
	body := map[string]any{}
	if change.Ms != nil {
		body["retention_ms"] = *change.Ms
	}
	if change.Bytes != nil {
		body["retention_bytes"] = *change.Bytes
	}
	var t Topic
	return t, c.doJSON(ctx, http.MethodPatch, topicPath(name), body, &t)
}

// DeleteTopic deletes a topic and its data.
func (c *Client) DeleteTopic(ctx context.Context, name string) error {
	return c.doJSON(ctx, http.MethodDelete, topicPath(name), nil, nil)
}
