package v1alpha2

import "testing"

// TestOriginalWording pins every status string against the original v0.10's,
// copied here verbatim (typos included) from its source as recorded in our
// reference notes: alerts and scripts of users who come from it match on
// them, so a rewording is a breaking change however much clearer it reads.
func TestOriginalWording(t *testing.T) {
	cases := []struct{ name, got, original string }{
		{"processing, create", ImageCacheMessagePullingImages, "Images are being pulled on to the nodes. Please view the status after some time"},
		{"processing, update", ImageCacheMessageUpdatingCache, "Image cache is being updated. Please view the status after some time"},
		{"processing, refresh", ImageCacheMessageRefreshingCache, "Image cache is being refreshed. Please view the status after some time"},
		{"processing, purge", ImageCacheMessagePurgingCache, "Image cache is being purged. Please view the status after some time"},
		{"succeeded", ImageCacheMessageImagesPulledSuccessfully, "All requested images pulled succesfully to respective nodes"},
		{"succeeded, purge", ImageCacheMessageImagesDeletedSuccessfully, "All cached images succesfully deleted from respective nodes"},
		{"failed", ImageCacheMessageImagePullFailedForSomeImages, `Image pull failed for some images. Please see "failures" section`},
		{"failed, purge", ImageCacheMessageImageDeleteFailedForSomeImages, `Image deletion failed for some images. Please see "failures" section`},
		{"no match", ImageCacheMessageNoImagesPulledOrDeleted, "No images were pulled or deleted because nodeSelector specified did not match any nodes"},
		{"aborted", ImageCacheMessagePullingAborted, "Image cache processing aborted. Image cache will get refreshed during next refresh cycle"},
		{"status Processing", string(ImageCacheActionStatusProcessing), "Processing"},
		{"status Succeeded", string(ImageCacheActionStatusSucceeded), "Succeeded"},
		{"status Failed", string(ImageCacheActionStatusFailed), "Failed"},
		{"status Aborted", string(ImageCacheActionStatusAborted), "Aborted"},
		{"status no match", string(ImageCacheActionStatusNoImagesPulledOrDeleted), "NoImagesPulledOrDeleted"},
		{"reason create", ImageCacheReasonImageCacheCreate, "ImageCacheCreate"},
		{"reason update", ImageCacheReasonImageCacheUpdate, "ImageCacheUpdate"},
		{"reason refresh", ImageCacheReasonImageCacheRefresh, "ImageCacheRefresh"},
		{"reason purge", ImageCacheReasonImageCachePurge, "ImageCachePurge"},
		{"reason aborted", ImageCacheReasonImagePullAborted, "ImagePullAborted"},
		{"refresh annotation", RefreshAnnotation, "kubefledged.io/refresh-imagecache"},
		{"purge annotation", PurgeAnnotation, "kubefledged.io/purge-imagecache"},
	}
	for _, c := range cases {
		if c.got != c.original {
			t.Errorf("%s: %q, the original says %q", c.name, c.got, c.original)
		}
	}
}
