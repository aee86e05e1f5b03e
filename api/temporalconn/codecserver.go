package temporalconn

import (
	"net/http"
	"slices"

	"go.temporal.io/sdk/converter"
)

// CodecHandler serves codec to the Temporal UI and CLI as a remote codec endpoint: POST …/encode and
// …/decode with a JSON body of payloads (`temporal --codec-endpoint URL`, or the UI's codec endpoint
// setting). Browsers call it from the UI's origin, so origins lists the UI origins allowed to (CORS),
// "*" for any.
//
// Whoever reaches it can decrypt what they send it: serve it only where operators (and the UI they use)
// reach it, never on a public address.
func CodecHandler(codec converter.PayloadCodec, origins []string) http.Handler {
	inner := converter.NewPayloadCodecHTTPHandler(codec)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" && (slices.Contains(origins, "*") || slices.Contains(origins, origin)) {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Content-Type, X-Namespace, Authorization")
			h.Add("Vary", "Origin")
		}
		if r.Method == http.MethodOptions {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if r.Method != http.MethodPost {
			http.Error(w, "POST …/encode or …/decode", http.StatusMethodNotAllowed)
			return
		}
		inner.ServeHTTP(w, r)
	})
}
