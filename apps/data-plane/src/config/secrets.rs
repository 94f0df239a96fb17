//! The JWT signing secret: from the environment or a generated private file.

use std::path::Path;

use anyhow::Context;

/// Reads the JWT secret from DATA_PLANE_JWT_SECRET, or from DATA_DIR/jwt_secret,
/// generating that file (mode 0600) on first use.
pub fn jwt_secret(data_dir: &Path) -> anyhow::Result<Vec<u8>> {
    if let Ok(secret) = std::env::var("DATA_PLANE_JWT_SECRET")
        && !secret.is_empty()
    {
        return Ok(secret.into_bytes());
    }
    let path = data_dir.join("jwt_secret");
    match std::fs::read(&path) {
        Ok(bytes) if bytes.len() >= 32 => return Ok(bytes),
        Ok(_) => anyhow::bail!(
            "{} is shorter than 32 bytes; delete it to generate a new one",
            path.display()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    }
    std::fs::create_dir_all(data_dir)
        .with_context(|| format!("creating {}", data_dir.display()))?;
    let secret: [u8; 32] = rand::random();
    let encoded = hex::encode(secret).into_bytes();
    write_private(&path, &encoded)?;
    tracing::info!(path = %path.display(), "generated a new JWT secret");
    Ok(encoded)
}

#[cfg(unix)]
fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.write_all(bytes)?;
    Ok(())
}

#[cfg(not(unix))]
fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    std::fs::write(path, bytes).with_context(|| format!("creating {}", path.display()))
}
