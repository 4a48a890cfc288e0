package httpapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/narad-io/storage/cluster"
)

// Transfer is cluster.Transfer over HTTP: a move's new owner calls
// the old owner's internal move endpoints (moves.go) at its
// advertised address, with the cluster's token, over TLS when this node
// serves TLS (its peers do too).
type Transfer struct {
	peers *http.Client
	token string
}

var _ cluster.Transfer = (*Transfer)(nil)

// NewTransfer makes the transfer of a node whose calls carry token
// (none when empty) and use tlsConfig (nil: plain HTTP).
func NewTransfer(token []byte, tlsConfig *tls.Config) *Transfer {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsConfig
	tr.ResponseHeaderTimeout = 30 * time.Second // a peer that took the call but never answers
	return &Transfer{peers: &http.Client{Transport: tr}, token: string(token)}
}

// CloseIdle closes the connections no call uses: once the mover stopped.
func (t *Transfer) CloseIdle() { t.peers.CloseIdleConnections() }

func movePath(mv cluster.Move) string { return "/v1/internal/moves/" + url.PathEscape(mv.ID) }

// Listing implements cluster.Transfer.
func (t *Transfer) Listing(ctx context.Context, src cluster.Location, mv cluster.Move) (cluster.TransferListing, error) {
	var body transferBody
	if err := t.call(ctx, http.MethodGet, src.Addr, movePath(mv)+"/listing", &body); err != nil {
		return cluster.TransferListing{}, err
	}
	return body.listing(), nil
}

// File implements cluster.Transfer.
func (t *Transfer) File(ctx context.Context, src cluster.Location, mv cluster.Move, f cluster.TransferFile) (io.ReadCloser, error) {
	resp, err := t.send(ctx, http.MethodGet, src.Addr, movePath(mv)+"/files/"+url.PathEscape(f.Name)+"?size="+strconv.FormatInt(f.Size, 10))
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// Freeze implements cluster.Transfer.
func (t *Transfer) Freeze(ctx context.Context, src cluster.Location, mv cluster.Move) (cluster.TransferListing, error) {
	var body transferBody
	if err := t.call(ctx, http.MethodPost, src.Addr, movePath(mv)+"/freeze", &body); err != nil {
		return cluster.TransferListing{}, err
	}
	return body.listing(), nil
}

// Release implements cluster.Transfer.
func (t *Transfer) Release(ctx context.Context, src cluster.Location, topic string, p int) error {
	path := "/v1/internal/partitions/" + url.PathEscape(topic) + "/" + strconv.Itoa(p) + "/release"
	return t.call(ctx, http.MethodPost, src.Addr, path, nil)
}

// send makes one call to a peer with the cluster's token; an answer that
// is not a success is its error.
func (t *Transfer) send(ctx context.Context, method, addr, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, addr+path, nil)
	if err != nil {
		return nil, err
	}
	if t.token != "" {
		req.Header.Set("Authorization", "Bearer "+t.token)
	}
	resp, err := t.peers.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return nil, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(b))
	}
	return resp, nil
}

// call is send with a JSON answer decoded into out (nil: none).
func (t *Transfer) call(ctx context.Context, method, addr, path string, out any) error {
	resp, err := t.send(ctx, method, addr, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		return nil
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(out)
}
