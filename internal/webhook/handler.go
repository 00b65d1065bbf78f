package webhook

import (
	"context"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/webhook/validation"
)

// Handler admits ImageCache creates and updates that pass the rules in
// webhook/validation.
type Handler struct {
	decoder admission.Decoder
}

// NewHandler returns a Handler with its own scheme, so it does not depend on
// what the manager's scheme happens to hold.
func NewHandler() *Handler {
	s := runtime.NewScheme()
	if err := v1alpha2.AddToScheme(s); err != nil {
		panic(err) // only a broken build gets here
	}
	return &Handler{decoder: admission.NewDecoder(s)}
}

// NewWebhook wraps the Handler for an http.ServeMux: it decodes the
// AdmissionReview, recovers panics and always answers.
func NewWebhook() *admission.Webhook {
	return (&admission.Webhook{Handler: NewHandler()}).WithRecoverPanic(true)
}

var imageCacheGK = v1alpha2.GroupVersion.WithKind("ImageCache").GroupKind()

// Handle validates one request.
func (h *Handler) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Kind.Group != imageCacheGK.Group || req.Kind.Kind != imageCacheGK.Kind {
		// A configuration that sends us something else is a wiring mistake;
		// blocking objects we know nothing about would spread it.
		return admission.Allowed("").WithWarnings(fmt.Sprintf(
			"kube-fledged webhook: %s is not an ImageCache; not validated", req.Kind.String()))
	}
	var errs field.ErrorList
	var name string
	switch req.Operation {
	case admissionv1.Create:
		ic := &v1alpha2.ImageCache{}
		if err := h.decoder.DecodeRaw(req.Object, ic); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode ImageCache: %w", err))
		}
		name = nameOf(ic, req.Name)
		errs = validation.ValidateCreate(ic)
	case admissionv1.Update:
		oldIC, newIC := &v1alpha2.ImageCache{}, &v1alpha2.ImageCache{}
		if err := h.decoder.DecodeRaw(req.Object, newIC); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode ImageCache: %w", err))
		}
		if err := h.decoder.DecodeRaw(req.OldObject, oldIC); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode old ImageCache: %w", err))
		}
		name = nameOf(newIC, req.Name)
		errs = validation.ValidateUpdate(oldIC, newIC)
	default:
		return admission.Allowed("")
	}
	if len(errs) == 0 {
		return admission.Allowed("")
	}
	// An Invalid status (422) with one cause per error: kubectl prints the
	// whole list, and clients can read the causes field by field.
	st := apierrors.NewInvalid(imageCacheGK, name, errs).Status()
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &st}}
}

func nameOf(ic *v1alpha2.ImageCache, reqName string) string {
	switch {
	case ic.Name != "":
		return ic.Name
	case reqName != "":
		return reqName
	default:
		return ic.GenerateName
	}
}
