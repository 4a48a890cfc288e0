package client

import (
	"context"
	"net/http"
)

// Topic describes a topic and its partitions.
type Topic struct {
	Name        string      `json:"name"`
	Incarnation string      `json:"incarnation"`
	RetentionMs int64       `json:"retention_ms"`
	Partitions  []Partition `json:"partitions"`
}

// Partition describes one partition of a topic.
type Partition struct {
	Partition     int   `json:"partition"`
	StartOffset   int64 `json:"start_offset"`
	HighWatermark int64 `json:"high_watermark"`
	Segments      int   `json:"segments"`
	Bytes         int64 `json:"bytes"`
}

// CreateTopic creates a topic of partitions partitions, keeping records
// retentionMs (0: forever). An identical topic is returned with created
// false; a different one is ErrTopicExists.
func (c *Client) CreateTopic(ctx context.Context, name string, partitions int, retentionMs int64) (t Topic, created bool, err error) {
	req := request{method: http.MethodPut, path: topicPath(name), contentType: "application/json"}
	req.body, err = jsonBody(map[string]any{"partitions": partitions, "retention_ms": retentionMs})
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

// SetRetention changes how long a topic keeps records (0: forever).
func (c *Client) SetRetention(ctx context.Context, name string, retentionMs int64) (Topic, error) {
	var t Topic
	return t, c.doJSON(ctx, http.MethodPatch, topicPath(name), map[string]any{"retention_ms": retentionMs}, &t)
}

// DeleteTopic deletes a topic and its data.
func (c *Client) DeleteTopic(ctx context.Context, name string) error {
	return c.doJSON(ctx, http.MethodDelete, topicPath(name), nil, nil)
}
