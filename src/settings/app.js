// Copy buttons: <button data-copy="ID"> copies the value of the input #ID.
document.addEventListener("click", async (event) => {
  const button = event.target.closest("[data-copy]");
  if (!button) return;
  const input = document.getElementById(button.dataset.copy);
  const status = document.getElementById("copy-status");
  input.select();
  try {
    await navigator.clipboard.writeText(input.value);
    if (status) status.textContent = "Copied to the clipboard.";
  } catch {
    document.execCommand("copy");
    if (status) status.textContent = "Copied.";
  }
});
