package redfishtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http/httptest"
	"time"
)

// CA is a throwaway certificate authority for emulators served over
// TLS on loopback: a CA certificate and a server certificate it signed for
// 127.0.0.1, ::1 and localhost. Clients that insist on a proper chain
// (Python's ssl, OpenSSL tools) trust PEM(); Go clients use Pool(). Not for
// production.
type CA struct {
	cert   *x509.Certificate
	der    []byte
	server tls.Certificate
}

// NewCA makes a CA and a server certificate valid for a day.
func NewCA() (*CA, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("redfishtest: CA key: %w", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "rebootkit fake CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("redfishtest: CA certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("redfishtest: server key: %w", err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("redfishtest: server certificate: %w", err)
	}
	return &CA{cert: caCert, der: caDER, server: tls.Certificate{Certificate: [][]byte{der, caDER}, PrivateKey: key}}, nil
}

// Pool returns a pool holding the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// PEM returns the CA certificate in PEM.
func (ca *CA) PEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.der})
}

// ServerConfig returns a TLS configuration serving the CA-signed
// certificate.
func (ca *CA) ServerConfig() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{ca.server}, MinVersion: tls.VersionTLS12}
}

// StartTLSWithCA serves the BMC on loopback with a certificate signed by
// ca; the caller closes the server.
func (b *BMC) StartTLSWithCA(ca *CA) *httptest.Server {
	srv := httptest.NewUnstartedServer(b)
	srv.TLS = ca.ServerConfig()
	srv.StartTLS()
	return srv
}
