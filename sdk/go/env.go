package baton

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// The environment variables the SDK reads (the same ones as the Python SDK and baton dev).
const (
	EnvURL         = "BATON_URL"
	EnvAPIKey      = "BATON_API_KEY"
	EnvDataDir     = "BATON_DATA_DIR"
	DefaultURL     = "http://127.0.0.1:8080"
	DefaultDataDir = ".baton/data"
	apiKeyFile     = "api-key"
)

// LocalAPIKeyPath is where baton dev keeps its key: $BATON_DATA_DIR/api-key, else
// .baton/data/api-key under the working directory.
func LocalAPIKeyPath() string {
	dir := os.Getenv(EnvDataDir)
	if dir == "" {
		dir = DefaultDataDir
	}
	return filepath.Join(dir, apiKeyFile)
}

// APIKeyFromEnv finds the key for a server at baseURL: $BATON_API_KEY, else, for a server on
// this machine only (127.0.0.1, localhost, ::1), the key a local baton dev keeps in its data
// directory. It also says where the key came from ("" when none was found).
func APIKeyFromEnv(baseURL string) (key, source string) {
	if key := os.Getenv(EnvAPIKey); key != "" {
		return key, "$" + EnvAPIKey
	}
	if !IsLoopback(baseURL) {
		return "", ""
	}
	path := LocalAPIKeyPath()
	data, err := os.ReadFile(path)
	if err != nil {
		return "", ""
	}
	key = strings.TrimSpace(string(data))
	if key == "" {
		return "", ""
	}
	return key, path
}

// IsLoopback reports whether rawURL names a host on this machine.
func IsLoopback(rawURL string) bool {
	u, err := url.Parse(rawURL)
	if err != nil {
		return false
	}
	switch u.Hostname() {
	case "127.0.0.1", "localhost", "::1":
		return true
	}
	return false
}
