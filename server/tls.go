package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync/atomic"

	"go.uber.org/zap"
)

// certReloader serves the certificate of --tls-cert and --tls-key, read
// again on reload (SIGHUP): a renewed certificate takes effect without a
// restart. A reload that fails keeps the certificate in use.
type certReloader struct {
	certFile, keyFile string
	cert              atomic.Pointer[tls.Certificate]
}

func newCertReloader(certFile, keyFile string) (*certReloader, error) {
	c := &certReloader{certFile: certFile, keyFile: keyFile}
	if _, err := c.reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// reload reads the pair again and, if it is good, serves it from now on.
func (c *certReloader) reload() (*x509.Certificate, error) {
	pair, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls certificate %s, key %s: %w", c.certFile, c.keyFile, err)
	}
	leaf := pair.Leaf
	if leaf == nil {
		return nil, errors.New("tls certificate: no leaf")
	}
	c.cert.Store(&pair)
	return leaf, nil
}

// config is the server's TLS configuration: TLS 1.2 at least, the current
// certificate at each handshake.
func (c *certReloader) config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return c.cert.Load(), nil
		},
	}
}

// reloadAndLog reloads and says so.
func (c *certReloader) reloadAndLog(logger *zap.Logger) {
	leaf, err := c.reload()
	if err != nil {
		logger.Error("tls certificate reload failed; serving the previous one", zap.Error(err))
		return
	}
	logger.Info("tls certificate reloaded", zap.String("subject", leaf.Subject.String()),
		zap.String("serial", leaf.SerialNumber.String()), zap.Time("not_after", leaf.NotAfter))
}
