// The dashboard's sign-in: posts the API key once as JSON to /dashboard/login; the server answers with an HttpOnly
// session cookie, and the reloaded page is the dashboard.
const form = document.getElementById('login');
const input = document.getElementById('api-key');
const error = document.getElementById('login-error');

form.addEventListener('submit', async (event) => {
  event.preventDefault();
  error.textContent = '';
  let res;
  try {
    res = await fetch('/dashboard/login', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ api_key: input.value }),
      credentials: 'same-origin',
    });
  } catch (err) {
    error.textContent = `the server cannot be reached: ${err.message}`;
    return;
  }
  if (res.ok) {
    window.location.reload();
    return;
  }
  const body = await res.json().catch(() => null);
  error.textContent = body?.error?.message ?? `sign-in failed (HTTP ${res.status})`;
  input.select();
});
