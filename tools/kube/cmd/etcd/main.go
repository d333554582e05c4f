// Command etcd runs a single-member etcd 3.6 server for the real local control plane.
//
// Debian's etcd (3.4) is too old for Kubernetes 1.35+ (consistent watches need 3.5.13 or newer), and
// no registry here ships an etcd binary, so hybrid-operator builds this small main around
// go.etcd.io/etcd/server/v3/embed at the etcd version pinned in go.mod. It listens on loopback only
// (refusing any other address), and only over TLS with client certificates signed by --trusted-ca-file,
// for clients and the (single) peer alike: on a shared machine every local user reaches loopback, and
// etcd holds every Secret. It keeps its data in --data-dir (a restart reuses it) and stops cleanly on
// SIGTERM or SIGINT.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
)

func loopbackURL(flagName, hostport string) (url.URL, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return url.URL{}, fmt.Errorf("--%s=%q: want 127.0.0.1:<port>: %w", flagName, hostport, err)
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return url.URL{}, fmt.Errorf("--%s=%q: only a loopback address is allowed", flagName, hostport)
	}
	if port == "0" {
		return url.URL{}, fmt.Errorf("--%s=%q: name the port (etcd advertises it)", flagName, hostport)
	}
	return url.URL{Scheme: "https", Host: hostport}, nil
}

func run() error {
	dataDir := flag.String("data-dir", "", "directory for etcd's data (created; reused on restart)")
	client := flag.String("listen-client", "127.0.0.1:2379", "loopback host:port for clients")
	peer := flag.String("listen-peer", "127.0.0.1:2380", "loopback host:port for the (single) peer")
	quota := flag.Int64("quota-backend-bytes", 2<<30, "backend size quota in bytes")
	logLevel := flag.String("log-level", "warn", "debug, info, warn or error")
	name := flag.String("name", "hybrid", "member name")
	certFile := flag.String("cert-file", "", "serving (and peer) certificate, PEM")
	keyFile := flag.String("key-file", "", "key of --cert-file, PEM")
	caFile := flag.String("trusted-ca-file", "", "CA whose client certificates are accepted, PEM")
	flag.Parse()
	if *dataDir == "" || *certFile == "" || *keyFile == "" || *caFile == "" {
		return fmt.Errorf("--data-dir, --cert-file, --key-file and --trusted-ca-file are required")
	}
	tlsInfo := transport.TLSInfo{CertFile: *certFile, KeyFile: *keyFile, TrustedCAFile: *caFile,
		ClientCertAuth: true}
	clientURL, err := loopbackURL("listen-client", *client)
	if err != nil {
		return err
	}
	peerURL, err := loopbackURL("listen-peer", *peer)
	if err != nil {
		return err
	}

	cfg := embed.NewConfig()
	cfg.Name = *name
	cfg.Dir = *dataDir
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ClientTLSInfo = tlsInfo
	cfg.PeerTLSInfo = tlsInfo
	cfg.QuotaBackendBytes = *quota
	// etcd's own main sets this default, embed does not: without it every request is logged as slow
	cfg.WarningUnaryRequestDuration = embed.DefaultWarningUnaryRequestDuration
	cfg.LogLevel = *logLevel
	cfg.LogOutputs = []string{"stderr"}

	server, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("start etcd in %s: %w", *dataDir, err)
	}
	defer server.Close()

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-server.Server.ReadyNotify():
		fmt.Fprintf(os.Stderr, "etcd ready: client %s, data %s\n", clientURL.String(), *dataDir)
	case <-time.After(60 * time.Second):
		return fmt.Errorf("etcd not ready within 60s")
	case sig := <-signals:
		fmt.Fprintf(os.Stderr, "etcd: %s before ready, stopping\n", sig)
		return nil
	}
	select {
	case sig := <-signals:
		fmt.Fprintf(os.Stderr, "etcd: %s, stopping\n", sig)
		return nil
	case err := <-server.Err():
		return fmt.Errorf("etcd stopped: %w", err)
	}
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "etcd: %v\n", err)
		os.Exit(1)
	}
}
