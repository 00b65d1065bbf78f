package images

import corev1 "k8s.io/api/core/v1"

// PresentOn says whether the node reports the image in status.images. The
// kubelet lists each image under several names (tags and repo digests), all
// of which are compared after normalisation. A digest reference matches a
// listed name with the same digest; a tag reference a listed name with the
// same tag.
func PresentOn(node *corev1.Node, image Ref) bool {
	for i := range node.Status.Images {
		for _, n := range node.Status.Images[i].Names {
			listed, err := Parse(n)
			if err != nil {
				continue
			}
			if listed.Name != image.Name {
				continue
			}
			if image.Digest != "" {
				if listed.Digest == image.Digest {
					return true
				}
				continue
			}
			if listed.Tagged && listed.Tag == image.Tag {
				return true
			}
		}
	}
	return false
}
