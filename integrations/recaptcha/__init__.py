"""Server-side reCAPTCHA v3 verification through Google's siteverify endpoint."""
