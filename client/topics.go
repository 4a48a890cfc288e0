package client

import (
	"context"
	"net/http"

	"github.com/narad-io/storage/api"
)

// Topic describes a topic and its partitions.
type Topic = api.TopicDescription

// Retention bounds what each partition of a topic keeps: records older
// than Ms milliseconds, and the oldest segments while a partition holds
// more than Bytes; 0 is no bound, either or both may be set.
type Retention struct {
	Ms    int64
	Bytes int64
}

// Partition describes one partition of a topic: its figures, and in a
// cluster its owner (Remote: another node serves it, and the figures are
// zero; ask the owner).
type Partition = api.PartitionDescription

// CreateTopic creates a topic of partitions partitions under retention
// (the zero value keeps everything). An identical topic is returned with
// created false; a different one is ErrTopicExists.
func (c *Client) CreateTopic(ctx context.Context, name string, partitions int, retention Retention) (t Topic, created bool, err error) {
	req := request{method: http.MethodPut, path: topicPath(name), contentType: "application/json"}
	req.body, err = jsonBody(api.TopicRequest{Partitions: &partitions, RetentionMs: &retention.Ms, RetentionBytes: &retention.Bytes})
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
	var out api.TopicList
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
	var t Topic
	return t, c.doJSON(ctx, http.MethodPatch, topicPath(name), api.TopicRequest{RetentionMs: change.Ms, RetentionBytes: change.Bytes}, &t)
}

// DeleteTopic deletes a topic and its data.
func (c *Client) DeleteTopic(ctx context.Context, name string) error {
	return c.doJSON(ctx, http.MethodDelete, topicPath(name), nil, nil)
}
