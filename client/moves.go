package client

import (
	"context"
	"net/http"
	"net/url"
)

// Move is a partition move under way in a cluster: its id, the
// partition, the node it moves from and to, and its state ("requested":
// the old owner serves on while the new one copies; "frozen": neither
// serves it until the move completes).
type Move struct {
	ID          string `json:"id"`
	Topic       string `json:"topic"`
	Partition   int    `json:"partition"`
	From        string `json:"from"`
	To          string `json:"to"`
	Incarnation string `json:"incarnation"`
	State       string `json:"state"`
	FrozenAtMs  int64  `json:"frozen_at_ms,omitempty"`
}

// MovePartition asks a cluster to move a partition to node to; the move
// runs in the background (Moves lists it until it is done). A node alone
// answers ErrNotACluster; a move that cannot be (no such node live, one
// under way already) ErrMoveRefused.
func (c *Client) MovePartition(ctx context.Context, topic string, p int, to string) (Move, error) {
	var out struct {
		Move Move `json:"move"`
	}
	err := c.doJSON(ctx, http.MethodPost, partitionPath(topic, p)+"/move", map[string]string{"to": to}, &out)
	return out.Move, err
}

// Moves lists the cluster's moves under way.
func (c *Client) Moves(ctx context.Context) ([]Move, error) {
	var out struct {
		Moves []Move `json:"moves"`
	}
	err := c.doJSON(ctx, http.MethodGet, "/v1/moves", nil, &out)
	return out.Moves, err
}

// CancelMove cancels a move under way: the partition stays its old
// owner's.
func (c *Client) CancelMove(ctx context.Context, id string) error {
	return c.doJSON(ctx, http.MethodDelete, "/v1/moves/"+url.PathEscape(id), nil, nil)
}

// Node is a live node of a cluster: its id, its address, whether it is
// draining, and how many partitions it owns.
type Node struct {
	ID         string `json:"id"`
	Addr       string `json:"addr"`
	Draining   bool   `json:"draining"`
	Partitions int    `json:"partitions"`
}

// MarkLost marks a node that is not live lost: once its fence horizon
// has passed, the cluster gives its partitions to live nodes, empty (the
// records only its disk held are given up). A live node is refused
// (ErrNodeLive), and so is an id no node registered under
// (ErrNodeNotFound).
func (c *Client) MarkLost(ctx context.Context, node string) error {
	return c.doJSON(ctx, http.MethodPost, "/v1/nodes/"+url.PathEscape(node)+"/lost", nil, nil)
}

// Nodes lists a cluster's live nodes.
func (c *Client) Nodes(ctx context.Context) ([]Node, error) {
	var out struct {
		Nodes []Node `json:"nodes"`
	}
	err := c.doJSON(ctx, http.MethodGet, "/v1/nodes", nil, &out)
	return out.Nodes, err
}

// Drain marks a node draining (draining false: no longer): the cluster
// moves every partition it owns to the other nodes and gives it no new
// ones (or gives it its share again).
func (c *Client) Drain(ctx context.Context, node string, draining bool) error {
	method := http.MethodPost
	if !draining {
		method = http.MethodDelete
	}
	return c.doJSON(ctx, method, "/v1/nodes/"+url.PathEscape(node)+"/drain", nil, nil)
}
