package fakeapi

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestAsAPIServer(t *testing.T) {
	g := NewWithT(t)
	jsonPatch := client.RawPatch(types.JSONPatchType, nil)
	g.Expect(apierrors.IsInvalid(AsAPIServer(jsonPatch, errors.New("testing value failed")))).To(BeTrue())
	g.Expect(AsAPIServer(jsonPatch, nil)).To(Succeed())
	notFound := apierrors.NewNotFound(schema.GroupResource{Resource: "imagecaches"}, "x")
	g.Expect(AsAPIServer(jsonPatch, notFound)).To(BeIdenticalTo(notFound), "an API error stays as it is")
	other := errors.New("boom")
	g.Expect(AsAPIServer(client.RawPatch(types.MergePatchType, nil), other)).To(BeIdenticalTo(other), "only JSON patches are answered")
}

func TestEvents(t *testing.T) {
	g := NewWithT(t)
	rec := record.NewFakeRecorder(10)
	rec.Event(nil, "Normal", "Done", "all of it")
	g.Expect(Events(rec)).To(Equal([]string{"Normal Done all of it"}))
	g.Expect(Events(rec)).To(BeEmpty(), "drained")
	g.Expect(Scheme().IsGroupRegistered("kubefledged.io")).To(BeTrue())
}
