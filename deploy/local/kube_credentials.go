package local

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/csv"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// kubeCredentials are the files and the admin token of the local control plane. They are generated once
// and kept in the state directory, so a restart after Down keeps every issued token and kubeconfig valid.
type kubeCredentials struct {
	saPrivate, saPublic string // service-account signing key pair (PEM)
	tokenFile           string // the API server's static token file
	token               string // the admin token (group system:masters)
	nodeToken           string // the real node's kubelet (group system:nodes)
}

// adminUser is the identity of the admin token.
const adminUser = "stackflow-admin"

func (s *Stack) ensureKubeCredentials() (kubeCredentials, error) {
	c := kubeCredentials{
		saPrivate: s.Path("kubernetes", "pki", "sa.key"),
		saPublic:  s.Path("kubernetes", "pki", "sa.pub"),
		tokenFile: s.Path("kubernetes", "pki", "tokens.csv"),
	}
	if err := ensureServiceAccountKey(c.saPrivate, c.saPublic); err != nil {
		return c, err
	}
	tok, err := ensureToken(c.tokenFile, adminUser, "system:masters")
	if err != nil {
		return c, err
	}
	c.token = tok
	if c.nodeToken, err = ensureToken(c.tokenFile, nodeUser, "system:nodes"); err != nil {
		return c, err
	}
	return c, s.ensureKubeletClientPKI()
}

// ensureServiceAccountKey writes an RSA key pair for signing service-account tokens unless both files exist.
func ensureServiceAccountKey(private, public string) error {
	if fileExists(private) && fileExists(public) {
		return nil
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("generate service-account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return fmt.Errorf("marshal service-account public key: %w", err)
	}
	priv := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := writeFileAtomic(private, priv, 0o600); err != nil {
		return fmt.Errorf("write service-account key %s: %w", private, err)
	}
	if err := writeFileAtomic(public, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644); err != nil {
		return fmt.Errorf("write service-account public key %s: %w", public, err)
	}
	return nil
}

// ensureToken returns user's token from the API server's token file, adding a random token in group
// to the file the first time (the API server reads the file when it starts).
func ensureToken(file, user, group string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read token file %s: %w", file, err)
	}
	recs, err := csv.NewReader(strings.NewReader(string(b))).ReadAll()
	if err != nil {
		return "", fmt.Errorf("read token file %s: %w", file, err)
	}
	for _, r := range recs {
		if len(r) >= 2 && r[1] == user {
			return r[0], nil
		}
	}
	raw := make([]byte, 24)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	tok := hex.EncodeToString(raw)
	// Format: token,user,uid,"group1,group2".
	b = append(b, fmt.Sprintf("%s,%s,%s,\"%s\"\n", tok, user, user, group)...)
	if err := writeFileAtomic(file, b, 0o600); err != nil {
		return "", fmt.Errorf("write token file %s: %w", file, err)
	}
	return tok, nil
}

// writeKubeconfig writes the admin kubeconfig and sets s.Kubeconfig. The API server's self-signed
// serving certificate is trusted when it verifies for HostGateway; otherwise the kubeconfig skips
// verification (loopback only).
func (s *Stack) writeKubeconfig(token string) error {
	path := s.Path("kubeconfig")
	cluster := &clientcmdapi.Cluster{Server: s.KubeAPI}
	ca, err := apiServerCA(s.apiServerCert(), HostGateway)
	if err != nil {
		s.Logf("kubernetes: %v; the kubeconfig skips TLS verification", err)
		cluster.InsecureSkipTLSVerify = true
	} else {
		cluster.CertificateAuthorityData = ca
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["stackflow"] = cluster
	cfg.AuthInfos[adminUser] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["stackflow"] = &clientcmdapi.Context{Cluster: "stackflow", AuthInfo: adminUser, Namespace: "default"}
	cfg.CurrentContext = "stackflow"
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		return fmt.Errorf("encode kubeconfig: %w", err)
	}
	// Atomic, because processes started earlier (and people) may be reading it.
	if err := writeFileAtomic(path, b, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	s.Kubeconfig = path
	return nil
}

// apiServerCA returns the PEM certificates to trust for the API server's self-signed serving certificate
// (the file holds the serving certificate followed by its CA), after checking it verifies for host.
func apiServerCA(certFile, host string) ([]byte, error) {
	b, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("read API server certificate: %w", err)
	}
	var certs []*x509.Certificate
	var caPEM []byte
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse API server certificate %s: %w", certFile, err)
		}
		certs = append(certs, c)
		if c.IsCA {
			caPEM = append(caPEM, pem.EncodeToMemory(blk)...)
		}
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("no certificate in %s", certFile)
	}
	if len(caPEM) == 0 {
		// A lone self-signed serving certificate is its own anchor.
		caPEM = b
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("no usable CA in %s", certFile)
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, DNSName: host}); err != nil {
		return nil, fmt.Errorf("API server certificate %s does not verify for %s: %w", certFile, host, err)
	}
	return caPEM, nil
}

// KubeREST returns a client configuration for the local API server with the admin kubeconfig.
func (s *Stack) KubeREST() (*rest.Config, error) {
	if s.Kubeconfig == "" {
		return nil, fmt.Errorf("kubernetes is not part of this stack")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", s.Kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	return cfg, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// writeFileAtomic writes through a temporary file and a rename, so readers never see a partial file.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// apiServerCert is the serving certificate (followed by its CA) the API server wrote into its cert dir.
func (s *Stack) apiServerCert() string {
	return filepath.Join(s.Path("kubernetes", "pki", "apiserver"), "apiserver.crt")
}

// retireLoopbackAPICert removes a serving certificate that does not verify for HostGateway (one a stack
// of an earlier release wrote when the API server listened on loopback), stopping the API server that
// serves it, so the API server writes one for its address again.
func (s *Stack) retireLoopbackAPICert() error {
	cert := s.apiServerCert()
	if !fileExists(cert) {
		return nil
	}
	if _, err := apiServerCA(cert, HostGateway); err == nil {
		return nil
	}
	s.Logf("kubernetes: the API server's certificate is not valid for %s; restarting it with a new one", HostGateway)
	if err := s.Stop(procAPIServer, 10*time.Second); err != nil {
		return err
	}
	for _, f := range []string{cert, strings.TrimSuffix(cert, ".crt") + ".key"} {
		if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("remove %s: %w", f, err)
		}
	}
	return nil
}
