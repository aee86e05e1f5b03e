package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"go.temporal.io/sdk/temporal"
)

// SecretKeyRef names one key of a Secret. Workflows pass these, never values.
type SecretKeyRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Key       string `json:"key"`
}

func (r SecretKeyRef) String() string { return r.Namespace + "/" + r.Name + "[" + r.Key + "]" }

// Owner is the object a generated Secret belongs to (an owner reference, so it goes with it).
type Owner struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	UID        string `json:"uid"`
}

// GeneratePassword returns 24 random hex characters: safe unquoted in URLs, INI files and SQL.
func GeneratePassword() (string, error) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// ReadSecretKey returns a key of a Secret; a missing Secret or key is a non-retryable ErrSecretMissing
// naming it.
func ReadSecretKey(ctx context.Context, core kubernetes.Interface, ref SecretKeyRef) (string, error) {
	sec, err := core.CoreV1().Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", temporal.NewNonRetryableApplicationError(fmt.Sprintf("Secret %s/%s not found", ref.Namespace, ref.Name), ErrSecretMissing, nil)
	}
	if err != nil {
		return "", Classify("read Secret "+ref.Namespace+"/"+ref.Name, err)
	}
	v, ok := sec.Data[ref.Key]
	if !ok || len(v) == 0 {
		return "", temporal.NewNonRetryableApplicationError(fmt.Sprintf("Secret %s/%s has no key %s", ref.Namespace, ref.Name, ref.Key), ErrSecretMissing, nil)
	}
	return string(v), nil
}

// EnsureSecretKey returns the value of ref's key, writing value() into it first when it is missing (the
// Secret is created, owned by owner, when it does not exist). The value is stored before anything uses
// it, so an activity retried after a crash finds the same value.
func EnsureSecretKey(ctx context.Context, core kubernetes.Interface, ref SecretKeyRef, owner *Owner, value func() (string, error)) (string, error) {
	var out string
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		secrets := core.CoreV1().Secrets(ref.Namespace)
		sec, err := secrets.Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if err == nil {
			if v := sec.Data[ref.Key]; len(v) > 0 {
				out = string(v)
				return nil
			}
		}
		v, verr := value()
		if verr != nil {
			return verr
		}
		if apierrors.IsNotFound(err) {
			sec = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: ref.Namespace,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "stackflow"}}, Type: corev1.SecretTypeOpaque}
			if owner != nil {
				sec.OwnerReferences = []metav1.OwnerReference{ownerRef(*owner)}
			}
			sec.Data = map[string][]byte{ref.Key: []byte(v)}
			_, err = secrets.Create(ctx, sec, metav1.CreateOptions{FieldManager: "stackflow"})
			if apierrors.IsAlreadyExists(err) {
				// Someone created it meanwhile: read it again.
				return apierrors.NewConflict(corev1.Resource("secrets"), ref.Name, err)
			}
			if err == nil {
				out = v
			}
			return err
		}
		if sec.Data == nil {
			sec.Data = map[string][]byte{}
		}
		sec.Data[ref.Key] = []byte(v)
		if _, err = secrets.Update(ctx, sec, metav1.UpdateOptions{FieldManager: "stackflow"}); err == nil {
			out = v
		}
		return err
	})
	if err != nil {
		return "", Classify("write Secret "+ref.Namespace+"/"+ref.Name, err)
	}
	return out, nil
}

// WriteSecretKey sets ref's key to value (creating the Secret, owned by owner, when missing).
func WriteSecretKey(ctx context.Context, core kubernetes.Interface, ref SecretKeyRef, owner *Owner, value string) error {
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		secrets := core.CoreV1().Secrets(ref.Namespace)
		sec, err := secrets.Get(ctx, ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = EnsureSecretKey(ctx, core, ref, owner, func() (string, error) { return value, nil })
			return err
		}
		if err != nil {
			return err
		}
		if string(sec.Data[ref.Key]) == value {
			return nil
		}
		if sec.Data == nil {
			sec.Data = map[string][]byte{}
		}
		sec.Data[ref.Key] = []byte(value)
		_, err = secrets.Update(ctx, sec, metav1.UpdateOptions{FieldManager: "stackflow"})
		return err
	})
	return Classify("write Secret "+ref.Namespace+"/"+ref.Name, err)
}

func ownerRef(o Owner) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: o.APIVersion, Kind: o.Kind, Name: o.Name, UID: types.UID(o.UID)}
}

// ErrSecretMissing is permanent for this attempt: a Secret (or key) an activity needs does not exist.
const ErrSecretMissing = "SecretMissing"

// LastLines are the last n non-empty lines of s: what a failure message quotes of a tool's output.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	lines = slices.DeleteFunc(lines, func(l string) bool { return strings.TrimSpace(l) == "" })
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
