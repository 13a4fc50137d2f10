"""Privacy attacks used by ``fedprint audit`` to measure what a protection is worth.

Gradient inversion (a client's update -> its training images):

* :mod:`fedprint.attacks.imprint` - malicious-server imprint block ("Robbing the Fed", Fowl et al. 2022);
* :mod:`fedprint.attacks.inversion` - DLG (L-BFGS gradient matching) and Inverting Gradients (cosine + TV);
* :mod:`fedprint.attacks.fpdfsn_inversion` - the β-aware attacker who undoes FP-DFSN's affine step;
* :mod:`fedprint.attacks.recon_metrics` - MSE / PSNR / SSIM / LPIPS on stated scales, verification of
  reconstructions;
* :mod:`fedprint.attacks.inversion_audit` - :func:`run_inversion_audit` (Table 5 rows) and :func:`save_grid`.

Submodules are imported explicitly (no re-exports), so importing one attack never pulls in the others.
"""
