package server

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/narad-io/storage/vfs"
)

// etcdEndpoints reads --metastore: "local" (or empty) is the embedded
// metastore (nil, no error); etcd://host:port[,host:port...] names etcd's
// client endpoints, and etcd+unix:///path a local etcd's Unix socket.
func etcdEndpoints(spec string) ([]string, error) {
	switch {
	case spec == "" || spec == "local":
		return nil, nil
	case strings.HasPrefix(spec, "etcd+unix://"):
		path := strings.TrimPrefix(spec, "etcd+unix://")
		if !filepath.IsAbs(path) {
			return nil, fmt.Errorf("metastore %q: want etcd+unix:///absolute/path", spec)
		}
		return []string{"unix://" + path}, nil
	case strings.HasPrefix(spec, "etcd://"):
		var out []string
		for _, hp := range strings.Split(strings.TrimPrefix(spec, "etcd://"), ",") {
			if host, port, err := net.SplitHostPort(hp); err != nil || host == "" || port == "" {
				return nil, fmt.Errorf("metastore %q: %q is not host:port", spec, hp)
			}
			out = append(out, "http://"+hp)
		}
		return out, nil
	}
	return nil, fmt.Errorf("metastore %q: want local, etcd://host:port[,host:port...] or etcd+unix:///path", spec)
}

// advertised is the address other nodes and clients reach this one at:
// --advertise-addr (a URL, or host:port taken as the scheme served), else
// the address listened on, unless that is a wildcard (0.0.0.0, [::]),
// which names no one host.
func advertised(flagAddr, scheme string, listening net.Addr) (string, error) {
	if flagAddr != "" {
		if !strings.Contains(flagAddr, "://") {
			flagAddr = scheme + "://" + flagAddr
		}
		u, err := url.Parse(flagAddr)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return "", fmt.Errorf("advertise-addr %q: want host:port or %s://host:port", flagAddr, scheme)
		}
		if u.Scheme != scheme {
			return "", fmt.Errorf("advertise-addr %q: this node serves %s", flagAddr, scheme)
		}
		return u.Scheme + "://" + u.Host, nil
	}
	tcp, ok := listening.(*net.TCPAddr)
	if !ok || tcp.IP.IsUnspecified() {
		return "", fmt.Errorf("listening on %s, which names no one host: give --advertise-addr", listening)
	}
	return scheme + "://" + listening.String(), nil
}

// peerTLSConfig is the TLS configuration of the calls this node makes to
// other nodes (a move's transfer): none while the node serves plain HTTP
// (so do its peers), else the system's roots or, with --peer-ca, the CA
// that signed the nodes' certificates.
func peerTLSConfig(cfg Config, tlsOn bool) (*tls.Config, error) {
	if !tlsOn {
		return nil, nil
	}
	out := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.PeerCA != "" {
		pem, err := vfs.ReadFile(vfs.OS{}, cfg.PeerCA, 1<<20)
		if err != nil {
			return nil, fmt.Errorf("peer-ca: %w", err)
		}
		out.RootCAs = x509.NewCertPool()
		if !out.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("peer-ca %s holds no PEM certificate", cfg.PeerCA)
		}
	}
	return out, nil
}
